"""Background tasks that run a crowd backend over a corpus's open tasks (the crowd app sits above annotation)."""

from __future__ import annotations

from django_tasks import task


@task()
def simulate(corpus: str, accuracy: float = 0.8, annotators: int = 5, seed: int = 0) -> dict:
    """Answer every open task of ``corpus`` with the simulated crowd, then re-aggregate."""
    from unpooled.service.corpora.models import Corpus
    from .simulated import SimulatedCrowd

    from unpooled.service.annotation.actions import reaggregate as do_reaggregate

    c = Corpus.objects.get(name=corpus)
    report = SimulatedCrowd.uniform(c, annotators, accuracy=accuracy, rng=seed).run()
    out = report.to_dict()
    out["dawid_skene_labels"] = do_reaggregate(c)
    return out


@task()
def sync_backend(corpus: str) -> dict:
    """Publish open tasks and collect answers through the corpus's backend, then re-aggregate."""
    from unpooled.service.corpora.models import Corpus
    from .base import backend_for

    from unpooled.service.annotation.actions import reaggregate as do_reaggregate

    c = Corpus.objects.get(name=corpus)
    backend = backend_for(c)
    out = {"backend": backend.name, "published": backend.publish(c), "collected": backend.collect(c)}
    out["dawid_skene_labels"] = do_reaggregate(c)
    return out


@task()
def reconcile_mturk(corpus: str, expire_orphans: bool = False) -> dict:
    """Repair the HIT rows of ``corpus`` after a crash (HITs found by RequesterAnnotation are adopted)."""
    from unpooled.service.corpora.models import Corpus
    from .base import MTurkCrowd
    from .mturk_sync import reconcile_corpus

    return reconcile_corpus(Corpus.objects.get(name=corpus), MTurkCrowd().backend, expire_orphans=expire_orphans)
