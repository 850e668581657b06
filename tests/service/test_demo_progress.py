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
