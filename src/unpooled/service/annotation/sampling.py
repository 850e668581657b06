r"""Document samples for exhaustive annotation, stored with their inclusion probabilities.

``uniform``: one uniform sample.  ``two-stage``: the first call draws stage 1 (20% of
``size``, uniform, inclusion n₁/N until stage 2 exists); once stage 1's entity layer is
annotated, the second call draws stage 2 by TF-IDF against those entities (Poisson
sampling) and sets stage 1's inclusion to 1 (conditional design, see
:mod:`unpooled.core.sampling.documents`).  ``tfidf``: one Poisson sample scored against
every entity annotated so far in the corpus (defensive uniform share 50%, as in two-stage).  ``seed``: the seeds' scheme
(:mod:`unpooled.core.sampling.seed`): like ``two-stage``, stage 1 (20%, uniform) first; once it
is annotated, the second call draws query entities from stage 1's named entities (each cluster by
its longest named mention) and adds up to 4 documents mentioning each by exact string match, plus
a defensive uniform share (30%, at least 30 documents); stage-2 documents get :math:`P(d \in S_2 \mid S_1)` (exact or by
Monte Carlo re-simulation) and stage 1 gets inclusion 1.
"""

from __future__ import annotations

from django.db import transaction

from unpooled.core.sampling import (FEW_DOCUMENTS, DocumentSample, sample_second_stage, sample_tfidf, sample_uniform,
                                    small_sample_warning)
from unpooled.core.sampling.seed import NAMED_TYPES, sample_seed_second_stage
from unpooled.service.corpora.models import Corpus

from .actions import AnnotationError, request_exhaustive
from .models import ExhaustiveDocument, Kind, Task

FIRST_FRACTION = 0.2


def _texts(corpus: Corpus) -> tuple[list[int], list[str]]:
    rows = list(corpus.documents.order_by("id").values_list("id", "text"))
    return [r[0] for r in rows], [r[1] for r in rows]


def _annotated_entities(corpus: Corpus, doc_ids=None) -> list[str]:
    tasks = Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, status=Task.Status.COMPLETE).select_related("document")
    if doc_ids is not None:
        tasks = tasks.filter(document_id__in=doc_ids)
    names = []
    for t in tasks:
        names += [t.document.text[m["start"]:m["end"]] for m in t.result.get("mentions", [])]
    return sorted(set(names))


SCHEMES = ("uniform", "two-stage", "tfidf", "seed")
STAGED = ("two-stage", "seed")


def annotated_entities(corpus: Corpus, doc_ids) -> list[str]:
    """The named entities annotated in ``doc_ids``: per entity cluster of a completed entity task, its longest
    mention of a named type (its name; pronouns and descriptions are not names to search for)."""
    tasks = Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, status=Task.Status.COMPLETE,
                                document_id__in=doc_ids).select_related("document")
    names = set()
    for t in tasks:
        clusters: dict = {}
        for m in (t.result or {}).get("mentions", []):
            if str(m.get("type", "")).upper() not in NAMED_TYPES:
                continue
            text = t.document.text[m["start"]:m["end"]].strip()
            key = m.get("cluster", (m["start"], m["end"]))
            if text and len(text) > len(clusters.get(key, "")):
                clusters[key] = text
        names.update(clusters.values())
    return sorted(names)


def sample_documents(corpus: Corpus, scheme: str, size: int, *, seed: int = 0) -> tuple[DocumentSample, int]:
    """Draw (the next stage of) a document sample, store it and create entity tasks.

    Returns the sample and the number of new documents.
    """
    ids, texts = _texts(corpus)
    n = len(ids)
    if n == 0:
        raise AnnotationError(f"corpus {corpus.name} has no documents")
    done = set(ExhaustiveDocument.objects.filter(corpus=corpus).values_list("document_id", flat=True))
    pos = {d: i for i, d in enumerate(ids)}
    if scheme == "uniform":
        if done:
            raise AnnotationError(f"corpus {corpus.name} already has an exhaustive sample ({len(done)} documents); "
                                  "a second uniform sample would change every inclusion probability")
        sample = sample_uniform(n, size, rng=seed)
    elif scheme in STAGED:
        stage1 = list(ExhaustiveDocument.objects.filter(corpus=corpus, scheme=scheme, stage=1)
                      .order_by("document_id").values_list("document_id", flat=True))
        if not stage1:
            if done:
                raise AnnotationError(f"corpus {corpus.name} already has a {len(done)}-document sample of another scheme")
            n1 = max(1, int(round(FIRST_FRACTION * size)))
            s = sample_uniform(n, min(n1, n), rng=seed)
            sample = DocumentSample(s.indices, s.inclusion, s.stage, scheme)
        else:
            if ExhaustiveDocument.objects.filter(corpus=corpus, stage=2).exists():
                raise AnnotationError(f"corpus {corpus.name}: both stages are already drawn")
            open_ = Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, document_id__in=stage1).exclude(
                status=Task.Status.COMPLETE).count()
            if open_:
                raise AnnotationError(f"stage 1 is not annotated yet: {open_} of {len(stage1)} documents have open "
                                      "entity tasks (stage 2 is drawn from stage 1's entities)")
            m2 = max(1, min(size - len(stage1), n - len(stage1)))
            if scheme == "seed":
                sample = sample_seed_second_stage(texts, [pos[d] for d in stage1], annotated_entities(corpus, stage1),
                                                  size=m2, rng=seed)
            else:
                sample = sample_second_stage(texts, [pos[d] for d in stage1], _annotated_entities(corpus, stage1),
                                             size=m2, rng=seed)
            with transaction.atomic():
                ExhaustiveDocument.objects.filter(corpus=corpus, scheme=scheme, stage=1).update(inclusion=1.0)
                made = request_exhaustive(corpus, sample, seed=seed)
            return sample, made
    elif scheme == "tfidf":
        if done:
            raise AnnotationError(f"corpus {corpus.name} already has an exhaustive sample ({len(done)} documents)")
        queries = _annotated_entities(corpus)
        if not queries:
            raise AnnotationError("tfidf sampling scores documents against annotated entities: none yet "
                                  "(annotate a uniform or two-stage first stage first)")
        sample = sample_tfidf(texts, queries, size=size, rng=seed)
    else:
        raise AnnotationError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    made = request_exhaustive(corpus, sample, seed=seed)
    return sample, made


def inclusion_by_document(corpus: Corpus) -> dict[int, float]:
    """Document pk → inclusion probability of the corpus's exhaustive sample (for recall weights)."""
    return dict(ExhaustiveDocument.objects.filter(corpus=corpus).values_list("document_id", "inclusion"))


def sample_size_warning(corpus: Corpus, planned: int | None = None) -> str | None:
    """:func:`~unpooled.core.sampling.small_sample_warning` for the corpus's exhaustive sample: the one drawn (its
    size and its scheme: with several schemes, the one needing the most documents), else the ``planned`` uniform
    sample (the lifecycle's and ``unpooled evaluate``'s: ``min(planned, documents)``); None when it is large enough,
    is the whole corpus, or when nothing is drawn or planned."""
    n = corpus.n_documents
    drawn = list(ExhaustiveDocument.objects.filter(corpus=corpus).values_list("scheme", flat=True))
    if drawn:
        known = [sc for sc in set(drawn) if sc in SCHEMES]
        if not known:
            return None
        scheme = max(sorted(known), key=lambda sc: FEW_DOCUMENTS[sc])
        return small_sample_warning(scheme, len(drawn), n)
    if not planned or not n:
        return None
    got = small_sample_warning("uniform", min(planned, n), n)
    return None if got is None else f"the planned exhaustive sample: {got}"


__all__ = ["SCHEMES", "annotated_entities", "inclusion_by_document", "sample_documents", "sample_size_warning"]
