"""Background annotation jobs (django-tasks; the db worker runs them). Each is idempotent."""

from __future__ import annotations

from django_tasks import task


@task()
def expire_leases() -> int:
    """Return abandoned work to the queue."""
    from .leasing import expire_leases as do_expire

    return do_expire()


@task()
def reaggregate(corpus: str) -> int:
    """Re-fit Dawid–Skene over the corpus's verification answers; append changed labels."""
    from unpooled.service.corpora.models import Corpus

    from .actions import reaggregate as do_reaggregate

    return do_reaggregate(Corpus.objects.get(name=corpus))
