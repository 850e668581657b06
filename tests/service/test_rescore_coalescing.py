"""Label batches that arrive while a re-scoring waits or runs collapse into one more re-scoring
(:func:`unpooled.service.evaluations.tasks.notify_labels`): the queue holds at most one waiting ``labels_arrived`` per
corpus, which re-scores with every label written before it starts."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_label_batches_during_a_rescoring_collapse_into_one(django_capture_on_commit_callbacks):
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    from unpooled.service.evaluations.tasks import labels_arrived, notify_labels

    def queued(corpus_id):
        return sorted(r.status for r in DBTaskResult.objects.filter(task_path=labels_arrived.module_path)
                      if (r.args_kwargs or {}).get("args") == [corpus_id])

    def batch(corpus_id):  # a batch of labels written in one transaction
        with django_capture_on_commit_callbacks(execute=True):
            notify_labels(corpus_id)

    for _ in range(3):
        batch(4242)
    assert queued(4242) == [TaskResultStatus.READY]
    batch(4343)  # another corpus has its own
    assert queued(4343) == [TaskResultStatus.READY]
    # a worker claims the re-scoring: batches arriving while it runs queue one more, not one each
    DBTaskResult.objects.filter(task_path=labels_arrived.module_path).update(status=TaskResultStatus.RUNNING)
    for _ in range(4):
        batch(4242)
    assert queued(4242) == sorted([TaskResultStatus.RUNNING, TaskResultStatus.READY])
