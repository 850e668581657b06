"""Background annotation jobs (django-tasks; the db worker runs them). Each is idempotent."""

from __future__ import annotations

from django_tasks import task


@task()
def expire_leases() -> int:
    """Return abandoned work to the queue."""
    from .actions import expire_leases as do_expire

    return do_expire()


@task()
def reaggregate(corpus: str) -> int:
    """Re-fit Dawid–Skene over the corpus's verification answers; append changed labels."""
    from unpooled.service.corpora.models import Corpus

    from .actions import reaggregate as do_reaggregate

    return do_reaggregate(Corpus.objects.get(name=corpus))


@task()
def simulate(corpus: str, accuracy: float = 0.8, annotators: int = 5, seed: int = 0) -> dict:
    """Answer every open task of ``corpus`` with the simulated crowd, then re-aggregate."""
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.simulated import SimulatedCrowd

    from .actions import reaggregate as do_reaggregate

    c = Corpus.objects.get(name=corpus)
    report = SimulatedCrowd.uniform(c, annotators, accuracy=accuracy, rng=seed).run()
    out = report.to_dict()
    out["dawid_skene_labels"] = do_reaggregate(c)
    return out


@task()
def sync_backend(corpus: str) -> dict:
    """Publish open tasks and collect answers through the corpus's backend, then re-aggregate."""
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.base import backend_for

    from .actions import reaggregate as do_reaggregate

    c = Corpus.objects.get(name=corpus)
    backend = backend_for(c)
    out = {"backend": backend.name, "published": backend.publish(c), "collected": backend.collect(c)}
    out["dawid_skene_labels"] = do_reaggregate(c)
    return out


@task()
def reconcile_mturk(corpus: str, expire_orphans: bool = False) -> dict:
    """Repair the HIT rows of ``corpus`` after a crash (HITs found by RequesterAnnotation are adopted)."""
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.base import MTurkCrowd
    from unpooled.service.crowd.mturk_sync import reconcile_corpus

    return reconcile_corpus(Corpus.objects.get(name=corpus), MTurkCrowd().backend, expire_orphans=expire_orphans)
