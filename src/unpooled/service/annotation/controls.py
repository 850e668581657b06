"""Gold control items for verification: items whose answer is known, mixed into the work to measure annotators
and to anchor the crowd model's rates (:mod:`unpooled.core.annotation.confusion`)."""

from __future__ import annotations

from collections import Counter

import numpy as np
from django.db.models import Count
from django.utils import timezone

from unpooled.service.corpora.models import Corpus, GoldMention, GoldRelation
from unpooled.service.submissions.models import RelationInstance

from .actions import AnnotationError
from .payloads import sentence_span
from .guidelines import VERSIONS
from .models import Kind, Task


def create_verify_controls(corpus: Corpus, n: int, *, rng=None) -> int:
    """Gold control items for verification, from the corpus's gold layer.

    Half are gold relations (answer: correct), half are gold entity pairs of one sentence
    given a relation that does not hold between them (answer: wrong).  Their relations follow the mix of the
    submissions' instances (else the gold layer's), so that the crowd's rates of each relation -- the strata
    of the crowd model -- are anchored on controls of that relation, correct and wrong.  Controls never
    produce labels; they measure annotators.
    """
    rng = np.random.default_rng(rng)
    rels = list(GoldRelation.objects.filter(document__corpus=corpus).order_by("pk").values_list("pk", "predicate"))
    if not rels:
        raise AnnotationError(f"corpus {corpus.name} has no gold relations to make controls from")
    schema = corpus.schema.schema()
    predicates = sorted(r.name for r in schema.canonical_relations)
    mix = dict(RelationInstance.objects.filter(submission__corpus=corpus, predicate__in=predicates)
               .values_list("predicate").annotate(n=Count("id")).values_list("predicate", "n"))
    if not mix:
        mix = dict(Counter(p for _, p in rels))
    names = sorted(mix)
    weights = np.array([mix[p] for p in names], float)
    by_pred: dict[str, list[int]] = {}
    for pk, p in rels:
        by_pred.setdefault(p, []).append(pk)
    made = 0
    for j in range(n):
        positive = j % 2 == 0
        want = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        pool = by_pred.get(want) if positive else None
        pk = (pool or [r for r, _ in rels])[int(rng.integers(len(pool or rels)))]
        made += _make_control(corpus, schema, predicates, pk, positive, want, rng)
    return made


def _make_control(corpus, schema, predicates, rel_pk: int, positive: bool, want: str, rng) -> int:
    """One control from gold relation ``rel_pk``: itself (``positive``), or its entity pair with ``want`` (or,
    when ``want`` holds between them, another relation that does not); 1 if it is new."""
    gr = GoldRelation.objects.select_related("document", "subject", "object").get(pk=rel_pk)
    doc = gr.document
    ms = list(GoldMention.objects.filter(entity=gr.subject).order_by("start", "end", "pk"))
    mo = list(GoldMention.objects.filter(entity=gr.object).order_by("start", "end", "pk"))
    pair = min(((a, b) for a in ms for b in mo), key=lambda ab: (abs(ab[0].sentence - ab[1].sentence), ab[0].start))
    true_preds = set(GoldRelation.objects.filter(subject=gr.subject, object=gr.object).values_list("predicate", flat=True))
    pred = gr.predicate
    if not positive:
        pred = want
        if pred in true_preds:
            choices = [p for p in predicates if p not in true_preds]
            pred = choices[int(rng.integers(len(choices)))]
    key = f"control:{doc.pk}:{pair[0].start}-{pair[0].end}:{pred}:{pair[1].start}-{pair[1].end}"
    lo, hi = min(pair[0].start, pair[1].start), max(pair[0].end, pair[1].end)
    c0, c1 = sentence_span(doc, lo, hi)
    rel = schema.resolve(pred)
    payload = {  # the same fields as verify_payload's: a control looks like any other item
        "predicate": pred, "description": rel.description if rel else "", "context": [c0, c1],
        "subject": {"start": pair[0].start, "end": pair[0].end, "text": doc.text[pair[0].start:pair[0].end]},
        "object": {"start": pair[1].start, "end": pair[1].end, "text": doc.text[pair[1].start:pair[1].end],
                   "value": None},
    }
    _, new = Task.objects.get_or_create(
        corpus=corpus, kind=Kind.VERIFY, document=doc, key=key,
        defaults={"payload": payload, "group": pred, "answers_needed": 0, "priority": timezone.now(),
                  "is_control": True, "control_answer": {"correct": positive},
                  "guideline_version": VERSIONS["verify"]})
    return int(new)
