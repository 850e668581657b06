"""The submission lifecycle: sample (adaptive) → annotate → score → publish; idempotent, resumable, retryable."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from unpooled.service.annotation import actions as ann
from unpooled.service.annotation import leasing
from unpooled.service.annotation.models import Backend, Kind, Label, Task, TaskRequest
from unpooled.service.evaluations import lifecycle, status, tasks
from unpooled.service.evaluations.models import Draw, Score
from unpooled.core.kb.jsonl import write_jsonl
from unpooled.service.submissions.actions import do_ingest_submission, load_kb
from unpooled.service.submissions.models import Submission

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db
S = Submission.Status


def _settings(corpus, **kw):
    st = ann.settings_for(corpus)
    for k, v in kw.items():
        setattr(st, k, v)
    st.save()
    return st


def test_simulated_crowd_runs_a_submission_to_published_and_reuses_labels(shared_data, tmp_path):
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 25, "life", team="DocRED-original", run="hwe")
    _settings(corpus, backend=Backend.SIMULATED, exhaustive_documents=6, min_draws=20, max_draws=60,
              target_halfwidth=0.08)
    assert lifecycle.advance(hwe) == S.PUBLISHED, hwe.error
    hwe.refresh_from_db()
    for level in ("instance", "relation", "entity"):
        n = hwe.plan[level]["draws"]
        assert 20 <= n <= 60 and Draw.objects.filter(submission=hwe, level=level).count() == n
        s = Score.objects.filter(submission=hwe, level=level).latest("id")
        assert 0 <= s.p_lo <= s.p <= s.p_hi <= 1 and 0 <= s.r_lo <= s.r <= s.r_hi <= 1
    p = status.progress(hwe)
    assert p["labels_received"] == p["labels_needed"] > 0 and p["answers_outstanding"] == 0
    assert p["cost_cents"] > 0 and p["eta_seconds"] == 0 and p["done"]
    assert [s["state"] for s in p["steps"]] == ["done"] * 5
    assert p["exhaustive_documents"] == 6

    # a second system made of the first one's drawn instances reuses the pool's labels: every draw of it has a
    # label already (a system sharing half of the first one's instances drew no labelled key with some seeds, and
    # the seed is the submission's id, which differs on PostgreSQL with the tests' order)
    kb = load_kb(hwe)
    drawn = set(Draw.objects.filter(submission=hwe).values_list("key", flat=True))
    mine = [i for i in kb.instances if i.key in drawn]
    assert mine
    half = tmp_path / "half.jsonl"
    with open(half, "w", encoding="utf-8") as fh:
        write_jsonl(fh, kb.entities, mine)
    other = do_ingest_submission(half, "life", "half", "r1", "jsonl").submission
    assert lifecycle.advance(other) == S.PUBLISHED, other.error
    other.refresh_from_db()
    parts = {o["part"]: o["n"] for o in status.label_origins(other)}
    assert parts["reused"] > 0 and parts["new"] == 0, parts
    board = __import__("unpooled.service.evaluations.leaderboard", fromlist=["leaderboard"]).leaderboard(corpus)
    assert {r["submission"].pk for r in board["rows"]} == {hwe.pk, other.pk}


def test_stages_are_idempotent_and_resume_after_a_crash(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 15, "idem")
    _settings(corpus, backend=Backend.INHOUSE, exhaustive_documents=3, min_draws=15, max_draws=15, levels="instance,entity")
    # a worker died half way through sampling: the first level was drawn, the rest was not
    lifecycle.set_status(sub, S.SAMPLING)
    sub.plan = {"instance": lifecycle.plan_draws(sub, "instance")}
    sub.save(update_fields=["plan"])
    from unpooled.service.evaluations.draws import draw

    draw(sub, 15, level="instance", rng=1)
    assert lifecycle.advance(sub) == S.ANNOTATING  # the in-house crowd has not answered
    assert Draw.objects.filter(submission=sub, level="instance").count() == 15  # nothing drawn twice
    assert Draw.objects.filter(submission=sub, level="entity").count() == 15
    tasks = Task.objects.filter(kind=Kind.VERIFY).count()
    requests = TaskRequest.objects.count()
    lifecycle.stage_sampling(sub)  # again: same draws, same tasks
    assert Draw.objects.filter(submission=sub).count() == 30
    assert (Task.objects.filter(kind=Kind.VERIFY).count(), TaskRequest.objects.count()) == (tasks, requests)
    assert lifecycle.advance(sub) == S.ANNOTATING
    p = status.progress(sub)
    assert p["labels_received"] == 0 and p["labels_needed"] == tasks and p["answers_outstanding"] == 3 * tasks


def test_failed_stage_records_its_error_and_an_organiser_retry_resumes_it(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 10, "fail")
    _settings(corpus, backend=Backend.SIMULATED, exhaustive_documents=2, levels="instance,bogus", max_draws=20)
    assert lifecycle.advance(sub) == S.FAILED
    sub.refresh_from_db()
    assert sub.failed_stage == S.SAMPLING and "levels: expected some of instance, relation, entity, got bogus" in sub.error
    assert status.progress(sub)["steps"][1]["state"] == "failed"
    _settings(corpus, levels="instance")
    tasks.retry(sub)  # enqueues the stage again (on commit)
    sub.refresh_from_db()
    assert sub.status == S.SAMPLING and sub.error == ""
    assert lifecycle.advance(sub) == S.PUBLISHED
    with pytest.raises(lifecycle.LifecycleError, match="has not failed"):
        tasks.retry(sub)


@pytest.mark.django_db(transaction=True)  # the real worker commits
def test_inhouse_answers_trigger_rescoring_and_publication(shared_data, tmp_path, django_user_model):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 8, "inh")
    _settings(corpus, backend=Backend.INHOUSE, exhaustive_documents=0, min_draws=5, max_draws=5, levels="instance",
              answers_per_item=1)
    assert lifecycle.advance(sub) == S.ANNOTATING
    annotator = leasing.annotator_for_user(django_user_model.objects.create_user("a1", password="x"))
    n = 0
    while (lease := leasing.lease_next(annotator, kind=Kind.VERIFY)) is not None:
        ann.submit_answer(lease, {"relation": "holds", "subject_ok": True, "object_ok": True}, seconds=3)
        n += 1
    assert n == Task.objects.filter(kind=Kind.VERIFY, is_control=False).count() > 0
    assert Label.objects.count() == n
    call_command("db_worker", batch=True, startup_delay=False, interval=0)  # runs labels_arrived
    sub.refresh_from_db()
    assert sub.status == S.PUBLISHED
    s = Score.objects.filter(submission=sub, level="instance").latest("id")
    assert s.p == pytest.approx(1.0)  # every answer said "holds"


def test_submitters_cannot_annotate(client):
    from unpooled.service.accounts.actions import do_sign_up

    client.force_login(do_sign_up("subm", "a-long-password", team="t"))
    for url in ("/annotate/", "/annotate/next/verify/"):
        page = client.get(url)
        assert page.status_code == 403 and "Submitters do not annotate" in page.content.decode()
