"""How far ``unpooled serve --demo`` has got loading the demo, for the banner on every page.

The demo loader (:mod:`unpooled.demo`, a child of ``serve``) writes a small JSON file in the data directory at
each step; the pages read it (no database query) and ``/demo/status.json`` returns it to the banner's script,
which polls it.  The file says:

``state``
    ``loading`` (corpus and submissions), ``evaluating`` (the simulated crowd labels, level by level),
    ``ready``, ``failed`` or ``stopped`` (serve ended before the loader finished).
``step``, ``steps``, ``message``
    the current step (1-based), how many there are, and what it does.
``started``, ``updated``
    seconds since the epoch; a loader that has not written for :data:`STALE_SECONDS` is gone (a killed serve),
    and its banner is no longer shown.
``levels``
    per level (``instance``, ``relation``, ``entity``): seconds after ``started`` when every demo submission had
    its score at that level, or ``null``.
``corpus``, ``answers``, ``error``
    the demo corpus's name, the crowd's answers so far, and why loading failed.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

FILE_NAME = "demo-progress.json"
#: seconds without a write after which a loader counts as gone (it writes at least every few seconds)
STALE_SECONDS = 120.0
#: the states in which the banner is shown
SHOWN = ("loading", "evaluating", "failed")
#: the largest progress file read (a bound on what a request may cost)
MAX_BYTES = 16_384


def progress_path(data_dir: str | Path | None = None) -> Path:
    if data_dir is None:
        from django.conf import settings

        data_dir = settings.DATA_DIR
    return Path(data_dir) / FILE_NAME


def write_progress(data: dict, data_dir: str | Path | None = None) -> None:
    """Replace the progress file atomically (a reader never sees half a file)."""
    path = progress_path(data_dir)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    tmp.write_text(json.dumps(dict(data, updated=time.time())), encoding="utf-8")
    os.replace(tmp, path)


def read_progress(data_dir: str | Path | None = None) -> dict | None:
    """The progress file's content, or ``None`` when there is none (or it cannot be read)."""
    try:
        with open(progress_path(data_dir), "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_BYTES:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def current_progress(data_dir: str | Path | None = None, *, now: float | None = None) -> dict | None:
    """The progress to show on pages: a loader at work (or one that failed), not a finished or vanished one."""
    data = read_progress(data_dir)
    if not data or data.get("state") not in SHOWN:
        return None
    now = time.time() if now is None else now
    updated = data.get("updated")
    if data.get("state") != "failed" and not (isinstance(updated, (int, float)) and now - updated < STALE_SECONDS):
        return None
    return data


def public_view(data: dict | None, *, now: float | None = None) -> dict:
    """What the status endpoint returns: the known fields only, with the elapsed time and a one-line summary."""
    if not data:
        return {"state": "none", "summary": ""}
    now = time.time() if now is None else now
    levels = data.get("levels") if isinstance(data.get("levels"), dict) else {}
    out = {k: (str(data[k])[:300] if data.get(k) is not None else None) for k in ("state", "message", "error")}
    for k in ("step", "steps", "answers"):
        v = data.get(k)
        out[k] = int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
    corpus = data.get("corpus")
    out["corpus"] = corpus if isinstance(corpus, str) and re.fullmatch(r"[-a-zA-Z0-9_]{1,100}", corpus) else None
    started = data.get("started")
    started = started if isinstance(started, (int, float)) and math.isfinite(started) else now
    out["elapsed"] = round(max(0.0, now - started))
    out["levels"] = {str(k)[:20]: (round(v) if isinstance(v, (int, float)) and math.isfinite(v) else None)
                     for k, v in list(levels.items())[:8]}
    out["summary"] = summary(out)
    return out


def clock(seconds: float | int | None) -> str:
    """``2 min 05 s`` / ``45 s``."""
    s = int(seconds or 0)
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def summary(view: dict) -> str:
    """One line for the banner: the step and, while evaluating, which levels have numbers."""
    state = view.get("state")
    if state == "failed":
        return f"The demo failed to load: {view.get('error') or 'see the terminal of ./dev up'}."
    if state == "ready":
        return "The demo is loaded: every leaderboard level has numbers."
    head = (f"Step {view.get('step')} of {view.get('steps')}: {view.get('message') or '…'} "
            f"({clock(view.get('elapsed'))} so far).")
    levels = view.get("levels") or {}
    if levels:
        parts = [f"{lv} {'ready at ' + clock(t) if t is not None else 'being evaluated'}" for lv, t in levels.items()]
        head += " Leaderboard levels: " + ", ".join(parts) + "."
    if view.get("answers"):
        head += f" Simulated crowd answers so far: {int(view['answers']):,}."
    return head
