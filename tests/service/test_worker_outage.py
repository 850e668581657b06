"""A database error interrupts a task: the worker requeues the task instead of recording it as failed (at most
MAX_DB_RETRIES claims), and the lifecycle does not take a database error for a failed stage.

In-process, on the test database; the real-process versions (PostgreSQL stopped and started mid-evaluation, a
worker killed mid-evaluation) are in tests/faults/.
"""

from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError
from django_tasks import TaskResultStatus, task
from django_tasks_db.models import DBTaskResult

from unpooled.service.workers import MAX_DB_RETRIES, run_worker, transient_database_error

CALLS = {"flaky": 0}


@task()
def flaky(fail_times: int) -> str:
    CALLS["flaky"] += 1
    if CALLS["flaky"] <= fail_times:
        raise OperationalError("server closed the connection unexpectedly")
    return "done"


@task()
def broken() -> None:
    raise ValueError("a bug, not the database")


@task()
def unstorable() -> object:
    return object()  # JSON cannot hold it: recording the success fails


def test_transient_database_errors():
    assert transient_database_error(OperationalError("x")) and transient_database_error(InterfaceError("x"))
    try:
        try:
            raise OperationalError("terminating connection due to administrator command")
        except OperationalError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as exc:
        assert transient_database_error(exc)
    assert not transient_database_error(ValueError("x")) and not transient_database_error(None)


@pytest.mark.django_db(transaction=True)  # the worker commits
def test_task_interrupted_by_the_database_is_requeued_and_then_succeeds(capfd):
    CALLS["flaky"] = 0
    res = flaky.enqueue(2)
    run_worker("outage-0", batch=True, interval=0)
    row = DBTaskResult.objects.get(pk=res.id)
    assert row.status == TaskResultStatus.SUCCESSFUL and row.return_value == "done"
    assert row.worker_ids == ["outage-0"] * 3 and CALLS["flaky"] == 3
    err = capfd.readouterr().err
    assert err.count("the database failed during it (OperationalError: server closed the connection") == 2


@pytest.mark.django_db(transaction=True)
def test_database_errors_fail_the_task_after_max_db_retries():
    CALLS["flaky"] = 0
    res = flaky.enqueue(10 ** 6)
    run_worker("outage-0", batch=True, interval=0)
    row = DBTaskResult.objects.get(pk=res.id)
    assert row.status == TaskResultStatus.FAILED and len(row.worker_ids) == MAX_DB_RETRIES
    assert row.exception_class_path == "django.db.utils.OperationalError"


@pytest.mark.django_db(transaction=True)
def test_other_errors_fail_the_task_at_once():
    res = broken.enqueue()
    run_worker("outage-0", batch=True, interval=0)
    row = DBTaskResult.objects.get(pk=res.id)
    assert row.status == TaskResultStatus.FAILED and row.worker_ids == ["outage-0"]
    assert "a bug, not the database" in row.traceback


@pytest.mark.django_db(transaction=True)
def test_an_outcome_that_cannot_be_recorded_fails_the_task_and_the_worker_goes_on():
    bad, good = unstorable.enqueue(), flaky.enqueue(0)
    run_worker("outage-0", batch=True, interval=0)
    bad_row, good_row = DBTaskResult.objects.get(pk=bad.id), DBTaskResult.objects.get(pk=good.id)
    assert bad_row.status == TaskResultStatus.FAILED and "TypeError" in bad_row.exception_class_path
    assert good_row.status == TaskResultStatus.SUCCESSFUL


@pytest.mark.django_db
def test_a_database_error_is_not_a_failed_stage(shared_data, tmp_path, monkeypatch):
    """The stage is not to blame: the error goes to the worker (which requeues the task) and the submission keeps
    its stage, where a later run resumes it."""
    from unpooled.service.annotation import actions as ann
    from unpooled.service.evaluations import lifecycle
    from unpooled.service.submissions.models import Submission

    from ..conftest import load_redocred_subset

    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 5, "outage")
    st = ann.settings_for(corpus)
    st.exhaustive_documents, st.min_draws, st.max_draws, st.levels = 0, 5, 5, "instance"
    st.save()

    def locked(sub):
        raise OperationalError("database is locked")

    monkeypatch.setattr(lifecycle, "stage_sampling", locked)
    with pytest.raises(OperationalError):
        lifecycle.advance(sub)
    sub.refresh_from_db()
    assert sub.status == Submission.Status.SAMPLING and sub.failed_stage == "" and sub.error == ""
    monkeypatch.undo()
    assert lifecycle.advance(sub) == Submission.Status.PUBLISHED
