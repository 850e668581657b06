"""The demo's progress file and what the banner and ``/demo/status.json`` make of it."""

from __future__ import annotations

import json

import pytest

from unpooled.service.web.demo_progress import (
    STALE_SECONDS, current_progress, progress_path, public_view, read_progress, write_progress,
)


def test_banner_shows_a_working_loader_only(tmp_path):
    assert current_progress(tmp_path) is None  # no demo here
    write_progress({"state": "loading", "step": 2, "steps": 6, "message": "running the baseline", "started": 0},
                   tmp_path)
    now = read_progress(tmp_path)["updated"]
    assert current_progress(tmp_path, now=now + 1)["step"] == 2
    assert current_progress(tmp_path, now=now + STALE_SECONDS + 1) is None  # the loader is gone (serve killed)
    for state in ("ready", "stopped"):
        write_progress({"state": state}, tmp_path)
        assert current_progress(tmp_path) is None
    write_progress({"state": "failed", "error": "boom"}, tmp_path)
    assert current_progress(tmp_path, now=now + 10 * STALE_SECONDS)["state"] == "failed"  # said until the next start


def test_status_view_is_bounded_and_summarised(tmp_path):
    progress_path(tmp_path).write_text("x" * 20_000)
    assert read_progress(tmp_path) is None  # too large: not read
    progress_path(tmp_path).write_text("[1, 2]")
    assert read_progress(tmp_path) is None
    view = public_view({"state": "evaluating", "step": 5, "steps": 6, "message": "evaluating the relation level",
                        "started": 100.0, "levels": {"instance": 125.4, "relation": None, "entity": None},
                        "answers": 1234, "secret": "not shown"}, now=230.0)
    assert "secret" not in view and view["elapsed"] == 130
    assert view["summary"] == ("Step 5 of 6: evaluating the relation level (2 min 10 s so far). "
                               "Leaderboard levels: instance ready at 2 min 05 s, relation being evaluated, "
                               "entity being evaluated. Simulated crowd answers so far: 1,234.")
    assert public_view(None) == {"state": "none", "summary": ""}
    odd = public_view({"state": "loading", "step": "two", "steps": float("nan"), "answers": "many", "started": "x",
                       "corpus": "../../etc", "levels": {"instance": "soon"}, "message": ["a"]}, now=5.0)
    assert odd["step"] is None and odd["answers"] is None and odd["corpus"] is None and odd["elapsed"] == 0
    assert odd["levels"] == {"instance": None} and odd["summary"].startswith("Step None of None: ['a']")


@pytest.mark.django_db
def test_status_endpoint_and_banner(client, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    assert client.get("/demo/status.json").json()["state"] == "none"
    assert b"demo-banner" not in client.get("/").content
    write_progress({"state": "loading", "step": 1, "steps": 6, "message": "loading the corpus", "started": 0},
                   tmp_path)
    resp = client.get("/demo/status.json")
    assert resp["Cache-Control"] == "no-store" and resp.json()["step"] == 1
    page = client.get("/").content.decode()
    assert 'id="demo-banner"' in page and "Step 1 of 6: loading the corpus" in page
    assert client.post("/demo/status.json").status_code == 405
    json.loads(progress_path(tmp_path).read_text())  # a whole file, written atomically


@pytest.mark.engine_neutral
@pytest.mark.django_db(transaction=True)
def test_the_loader_follows_the_evaluation_level_by_level_to_ready(shared_data, tmp_path, settings):
    """``watch_evaluation`` (what the demo loader runs once the submissions are in): it has the corpus evaluated
    (here in-process: the immediate task backend), says each level as it gets numbers, and ends ready."""
    from unpooled.demo import DEMO_LEVELS, Progress, filled_levels, watch_evaluation

    from ..conftest import load_redocred_subset

    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
    load_redocred_subset(shared_data, tmp_path, 4, "mini-demo", team="DocRED-original", run="hwe")
    said: list[str] = []
    progress = Progress(said.append, steps=3, data_dir=tmp_path)
    progress.data["step"] = 3  # as after the corpus and the submissions
    assert watch_evaluation("mini-demo", progress, url="http://localhost:8000", every=0.01) is True
    assert filled_levels("mini-demo") == set(DEMO_LEVELS)
    saved = read_progress(tmp_path)
    assert saved["state"] == "ready" and saved["step"] == saved["steps"] == 6, saved
    assert all(isinstance(saved["levels"][lv], int) for lv in DEMO_LEVELS), saved
    for lv in DEMO_LEVELS:
        assert any(m.startswith(f"demo: the {lv} level has numbers") and
                   m.endswith(f"http://localhost:8000/corpora/mini-demo/leaderboard/?level={lv}") for m in said), said
    assert said[-1].startswith("demo: ready") and current_progress(tmp_path) is None  # no banner once ready
    # a second start finds every level filled: ready at once, nothing enqueued
    again: list[str] = []
    p2 = Progress(again.append, data_dir=tmp_path)
    assert watch_evaluation("mini-demo", p2, every=0.01) is True
    assert not any("evaluates" in m for m in again) and again[-1].startswith("demo: ready")
