"""Background tasks of the organiser console."""

from __future__ import annotations

from django_tasks import task


@task()
def analyse_documents(corpus_id: int, size: int, draws: int, seed: int) -> dict:
    """The document-sample analysis of a corpus, computed and cached (:mod:`.documents`)."""
    from unpooled.service.corpora.models import Corpus

    from .documents import run_and_store

    corpus = Corpus.objects.get(pk=corpus_id)
    got = run_and_store(corpus, {"size": size, "draws": draws, "seed": seed})
    return {"corpus": corpus.name, "seconds": got["seconds"]}
