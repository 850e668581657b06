"""``unpooled bench rescore --exhaustive N``: the entity layer of N of the bench's exhaustive documents, so that a
re-scoring's entity scores (:mod:`unpooled.service.evaluations.entities`) have what they have in a shared task.

Per document, ``k`` simulated annotators of the bench's crowd mark the generated mentions (each kept with the
annotator's accuracy, its type wrong or its cluster split with the complement's share, now and then a false mark on
a shortened span); the aggregated layer is :func:`~unpooled.core.annotation.answers.aggregate_mentions` of their
answers, as :func:`~unpooled.service.annotation.actions.complete_task` makes it.  Then one completed cross-document
clustering task groups every layer cluster (none is linked: NIL) by its entity (type and name), a few put alone.
The verification tasks' payloads carry their instances' argument spans and the answers say ``subject_ok`` /
``object_ok`` (:func:`verification_item`), which the argument precision reads.
"""

from __future__ import annotations


def verification_item(key: str, kh: str, doc_pk: int, correct: bool, doc: str, ss: int, se: int, os_: int, oe: int,
                      value, gold_spans: set) -> tuple:
    """What :class:`~unpooled.bench.rescore._Crowd` labels a key with: ``(key, key hash, document pk, correct,
    payload, subject is a mention, object is a mention)`` (a mention: a generated mention's span)."""
    payload = {"subject": {"start": ss, "end": se},
               "object": {"value": value} if value is not None else {"start": os_, "end": oe}}
    return (key, kh, doc_pk, correct, payload, (doc, ss, se) in gold_spans,
            value is not None or (doc, os_, oe) in gold_spans)


def _answer(rng, acc: float, mentions: list, types: list[str]) -> dict:
    """One annotator's entity answer on a document's generated mentions ``(type, name, start, end)``."""
    cluster = {}
    out = []
    seen = set()
    for t, name, s, e in mentions:
        if (s, e) in seen:
            continue
        seen.add((s, e))
        c = cluster.setdefault((t, name), len(cluster))
        if rng.random() < acc:
            typ = t if rng.random() < acc else types[int(rng.integers(len(types)))]
            out.append({"start": s, "end": e, "type": typ,
                        "cluster": c if rng.random() < acc else 1000 + len(out)})
        if rng.random() < (1 - acc) / 3 and e - s > 2 and (s, s + (e - s) // 2) not in seen:
            out.append({"start": s, "end": s + (e - s) // 2, "type": t, "cluster": 2000 + len(out)})
    return {"mentions": sorted(out, key=lambda m: (m["start"], m["end"]))}


def entity_layers(corpus, doc_ids: list[str], spans: dict, crowd, seed: int, k: int = 3) -> int:
    """Completed entity tasks of ``doc_ids`` (``k`` answers each from ``crowd``'s annotators) and one completed
    clustering task over their clusters; returns the layer mentions written."""
    import numpy as np
    from django.db import transaction
    from django.utils import timezone

    from unpooled.core.annotation.answers import aggregate_mentions
    from unpooled.service.annotation.models import Answer, Assignment, Kind, Task
    from unpooled.service.corpora.models import Document

    rng = np.random.default_rng(seed + 6)
    types = sorted(corpus.schema.schema().entity_types)
    pk = dict(Document.objects.filter(corpus=corpus, doc_id__in=doc_ids).values_list("doc_id", "id"))
    now = timezone.now()
    items, entity, written = [], [], 0
    with transaction.atomic():
        for d in doc_ids:
            who = rng.choice(len(crowd.annotators), size=k, replace=False).tolist()
            answers = [_answer(rng, float(crowd.accuracy[w]), spans[d], types) for w in who]
            layer = aggregate_mentions(answers)
            written += len(layer)
            task = Task.objects.create(corpus=corpus, kind=Kind.ENTITIES, document_id=pk[d], key="", payload={},
                                       answers_needed=k, status=Task.Status.COMPLETE, result={"mentions": layer},
                                       priority=now, completed=now, guideline_version="bench")
            for w, value in zip(who, answers):
                a = Assignment.objects.create(task=task, annotator=crowd.annotators[w], status="submitted",
                                              token=f"bench-{task.pk}-{w}", leased=now, expires=now)
                Answer.objects.create(assignment=a, task=task, annotator=crowd.annotators[w], value=value,
                                      weight=1.0, guideline_version="bench")
            name = {(s, e): (t, n) for t, n, s, e in spans[d]}
            for c in sorted({m["cluster"] for m in layer}):
                first = next(m for m in layer if m["cluster"] == c)
                items.append({"doc": d, "document": pk[d], "cluster": c})
                ent = name.get((first["start"], first["end"]))
                entity.append(ent if ent is not None and rng.random() < 0.9 else f"#alone{len(items)}")
        groups: dict = {}
        for i, e in enumerate(entity):
            groups.setdefault(e, []).append(i)
        if items:
            Task.objects.create(corpus=corpus, kind=Kind.CLUSTERS, document_id=items[0]["document"],
                                key="clusters:bench", payload={"items": items, "block": [0, 1]}, answers_needed=k,
                                status=Task.Status.COMPLETE, result={"clusters": list(groups.values()), "answers": k},
                                priority=now, completed=now, guideline_version="bench")
    return written


def entity_values(corpus) -> dict:
    """``(submission pk, metric, field) -> number`` of the corpus's entity scores as the service computes them now
    (:func:`~unpooled.service.evaluations.entities.results`; value, standard error and interval of every metric)."""
    from unpooled.service.evaluations.entities import results

    got = results(corpus)
    out: dict = {}
    for sub, res in zip(got.subs if got else [], got.scores if got else []):
        for k, e in res.metrics.items():
            for f in ("value", "se", "lo", "hi"):
                out[(sub.pk, k, f)] = getattr(e, f)
    return out


def max_difference(a: dict, b: dict) -> float:
    """The largest absolute difference between two :func:`entity_values` (NaN against a number, or a figure one has
    and the other not: infinite)."""
    import math

    worst = 0.0
    for k in a.keys() | b.keys():
        x, y = a.get(k), b.get(k)
        if x is None or y is None:
            if x is not y:
                return math.inf
            continue
        x, y = float(x), float(y)
        if math.isnan(x) or math.isnan(y):
            if math.isnan(x) != math.isnan(y):
                return math.inf
            continue
        worst = max(worst, abs(x - y))
    return worst
