"""Gold controls look like items to the annotator, down to the work the server does (issue 23, build 2: "controls
indistinguishable from items (counts, timing, order)").  The counts and the undo are covered by
``test_crowd_integrity.py``; here the server's work: the database statements a task page and an answer run are the
same for a control and an item, so the page's time carries nothing an attacker can average out by reloading.  The
time itself is measured by ``unpooled bench controls`` (a benchmark, not a test), run here at a tiny size."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from unpooled.service.annotation import actions
from unpooled.service.annotation.controls import create_verify_controls
from unpooled.service.annotation.models import Assignment
from unpooled.service.submissions.models import RelationInstance

from ..conftest import load_redocred_subset

HOLDS = {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}


def _shape(queries) -> list[str]:
    """The statements without their values: literals, numbers and savepoint names replaced."""
    out = []
    for q in queries:
        sql = re.sub(r"'(?:[^']|'')*'", "?", q["sql"])
        sql = re.sub(r'"s\d+_x\d+"', '"sp"', sql)
        out.append(re.sub(r"\b\d+(\.\d+)?\b", "N", sql))
    return out


def _visit(client, st, share: float):
    """Lease the next verification task with control share ``share``, view its page twice and answer it: the
    statements of each request, and whether the task was a control."""
    st.control_share = share
    st.save(update_fields=["control_share"])
    r = client.get(reverse("annotation:next", args=["verify"]))
    assert r.status_code == 302
    token = r["Location"].rstrip("/").split("/")[-1]
    url = reverse("annotation:task", args=[token])
    got = {}
    for view in ("first view", "reload"):
        with CaptureQueriesContext(connection) as q:
            assert client.get(url).status_code == 200
        got[view] = _shape(q.captured_queries)
    with CaptureQueriesContext(connection) as q:
        assert client.post(url, {"answer": json.dumps(HOLDS), "seconds": "6"}).status_code == 302
    got["answer"] = _shape(q.captured_queries)
    return got, Assignment.objects.get(token=token).task.is_control


@pytest.mark.django_db
def test_a_control_s_page_and_answer_run_the_statements_an_item_s_do(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 4, "alike", team="TeamA", run="a1")
    st = actions.settings_for(corpus)
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:10]
    actions.request_verification(sub, ids)
    create_verify_controls(corpus, 6, rng=0)
    User.objects.create_user("looker", password="pw-looker-123")
    client = Client()
    assert client.login(username="looker", password="pw-looker-123")
    _visit(client, st, 0.0)  # the first answer: the annotator's counts and undo state exist from here on
    control, is_control = _visit(client, st, 1.0)
    item, is_item_control = _visit(client, st, 0.0)
    assert is_control and not is_item_control
    assert control["first view"] == item["first view"]
    assert control["reload"] == item["reload"]
    # the answer: the same statements until the answer is stored and the task's answers counted; then a control
    # scores its annotator (an item completes once it has enough answers).  Told only after the answer, which is
    # final for a control (no undo of its score), and each control is offered to an annotator once.
    counted = next(i for i, s in enumerate(item["answer"]) if s.startswith('SELECT COUNT(*) AS "__count" FROM '
                                                                          '"annotation_answer"'))
    assert control["answer"][:counted + 1] == item["answer"][:counted + 1]
    assert any("control_scored" in s for s in control["answer"][counted + 1:])


@pytest.mark.slow
def test_bench_controls_measures_both_requests(tmp_path, shared_data):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "UNPOOLED_DATA_DIR")}
    env["UNPOOLED_SHARED_DATA"] = str(shared_data)
    out = subprocess.run(
        [sys.executable, "-m", "unpooled.cli.main", "bench", "controls", "--documents", "3", "--items", "12",
         "--controls", "8", "--annotators", "2", "--reloads", "2", "--json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["items"] == 24 and got["controls"] >= 1 and got["reloads"] == 2
    for what in ("get", "post"):
        g = got[what]
        assert g["control_median_ms"] > 0 and g["item_median_ms"] > 0 and 0 <= g["mann_whitney_p"] <= 1
        assert all(0.5 <= v <= 1 for v in (*g["told_apart"].values(), *g["chance"].values()))
    assert set(got["get"]["told_apart"]) == {"1", "5", "25"}
