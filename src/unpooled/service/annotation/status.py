"""Annotation progress, cost, agreement and annotator quality (organiser page and CLI)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from django.db.models import Count, Max, Q, Sum

from unpooled.service.corpora.models import Corpus

from .models import Annotator, Answer, Assignment, Kind, Label, Task


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)


def _verify_answers(corpus: Corpus | None):
    qs = Answer.objects.filter(task__kind=Kind.VERIFY, task__is_control=False, weight__gt=0)
    if corpus is not None:
        qs = qs.filter(task__corpus=corpus)
    return list(qs.values_list("task_id", "annotator_id", "correct", "task__group", "task__key_hash"))


def verification_agreement(corpus: Corpus | None = None) -> dict:
    """Fleiss κ and Krippendorff α of the verification answers, overall and per relation type."""
    from unpooled.core.annotation import Answers, agreement_by_group, fleiss_kappa, krippendorff_alpha

    rows = _verify_answers(corpus)
    if not rows:
        return {"overall": {"items": 0, "answers": 0, "fleiss_kappa": None, "krippendorff_alpha": None},
                "by_relation": {}}
    answers = Answers.from_records((t, w, int(bool(c))) for t, w, c, *_ in rows)
    group_of = {t: g for t, _, _, g, _ in rows}
    groups = [group_of[k] for k in answers.item_keys]
    per = agreement_by_group(answers, groups, n_classes=2)
    overall = {"items": len(answers.item_keys), "answers": len(rows),
               "fleiss_kappa": _num(fleiss_kappa(answers, n_classes=2)),
               "krippendorff_alpha": _num(krippendorff_alpha(answers, n_classes=2))}
    from unpooled.service.corpora.names import predicate_order, relation_names

    names = relation_names(corpus)
    # the relations with most items first (ties by number: P17 before P131), each with its schema's name
    order = sorted(per, key=lambda g: (-per[g].get("items", 0), predicate_order(str(g))))
    by_rel = {g: {**{k: (_num(v) if isinstance(v, float) else v) for k, v in per[g].items()},
                  "name": names.get(g, "")} for g in order}
    return {"overall": overall, "by_relation": by_rel}


def partial_annotators(corpus: Corpus) -> list[dict]:
    """The annotators (not blocked) whose verification answers take one team's side, flagged ones only
    (:mod:`unpooled.core.annotation.partiality`): who, which team, which way, how often against the others, and the
    rates compared.  A team's items are the instances of its runs (the human reference's aside), private ones
    included: the organiser sees them."""
    from django.core.cache import cache

    from unpooled.service.submissions.models import Submission

    # the console asks on every page: the answer is kept until an answer or a submission is added (or a block, a
    # weight changes: counted answers), reading every answer and every team's instances only then
    a = Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, weight__gt=0).aggregate(
        n=Count("id"), last=Max("id"))
    b = Submission.objects.filter(corpus=corpus).aggregate(n=Count("id"), last=Max("id"))
    blocked = Annotator.objects.filter(blocked=True).count()
    key = f"unpooled.partial:v1:{corpus.pk}:{a['n']}-{a['last']}-{b['n']}-{b['last']}-{blocked}"
    got = cache.get(key)
    if got is None:
        got = _partial_annotators(corpus)
        cache.set(key, got, 3600)
    return got


def _partial_annotators(corpus: Corpus) -> list[dict]:
    from unpooled.core.annotation.partiality import partiality
    from unpooled.service.submissions.models import RelationInstance

    blocked = set(Annotator.objects.filter(blocked=True).values_list("pk", flat=True))
    rows = [r for r in _verify_answers(corpus) if r[1] not in blocked]  # a blocked annotator is dealt with
    hashes = sorted({h for *_, h in rows})
    teams_of_hash: dict[int, list[int]] = defaultdict(list)
    for i in range(0, len(hashes), 2000):
        for h, team in (RelationInstance.objects.filter(submission__corpus=corpus, submission__is_reference=False,
                                                        key_hash__in=hashes[i:i + 2000])
                        .values_list("key_hash", "submission__team_id").distinct()):
            teams_of_hash[h].append(team)
    teams_of = {t: teams_of_hash.get(h, ()) for t, *_, h in rows}
    flags = [f for f in partiality(((t, a, c) for t, a, c, *_ in rows), teams_of) if f.flagged]
    if not flags:
        return []
    from unpooled.service.submissions.models import Team

    names = dict(Team.objects.filter(pk__in={f.team for f in flags}).values_list("pk", "name"))
    people = {a.pk: str(a) for a in Annotator.objects.filter(pk__in={f.annotator for f in flags})}
    return [{"annotator_id": f.annotator, "annotator": people.get(f.annotator, ""), "team_id": f.team,
             "team": names.get(f.team, ""), "direction": f.direction, "against": f.against, "chances": f.chances,
             "rate_elsewhere": _num(f.rate_elsewhere), "rate_others": _num(f.rate_others), "p_value": f.p_value}
            for f in flags]


def kind_summary(corpus: Corpus | None = None) -> list[dict]:
    """Per task type: items (complete, open, cancelled), answers, cost, mean seconds per answer.

    ``answers_needed`` is the number of counted answers the items not cancelled ask for
    (``answers_needed`` of each task), ``answers_received`` how many of those are in
    (counted answers, each task's capped at what it needs); gold controls are not items.
    """
    out = []
    for kind in Kind.values:
        tasks = Task.objects.filter(kind=kind, is_control=False)
        answers = Answer.objects.filter(task__kind=kind)
        if corpus is not None:
            tasks, answers = tasks.filter(corpus=corpus), answers.filter(task__corpus=corpus)
        t = tasks.aggregate(items=Count("id"), complete=Count("id", filter=Q(status=Task.Status.COMPLETE)),
                            open=Count("id", filter=Q(status=Task.Status.OPEN)),
                            cancelled=Count("id", filter=Q(status=Task.Status.CANCELLED)))
        needed = received = 0
        for need, got in (tasks.exclude(status=Task.Status.CANCELLED)
                          .annotate(got=Count("answers", filter=Q(answers__weight__gt=0)))
                          .values_list("answers_needed", "got")):
            needed += need
            received += min(need, got)
        a = answers.aggregate(n=Count("id"), counted=Count("id", filter=Q(weight__gt=0)), cost=Sum("cost_cents"),
                              total_seconds=Sum("seconds"), timed=Count("seconds"))
        controls = Answer.objects.filter(task__kind=kind, task__is_control=True)
        if corpus is not None:
            controls = controls.filter(task__corpus=corpus)
        out.append({
            "kind": kind, "items": t["items"], "complete": t["complete"], "open": t["open"],
            "cancelled": t["cancelled"], "answers_needed": needed, "answers_received": received,
            "answers": a["n"], "answers_counted": a["counted"], "control_answers": controls.count(),
            "cost_cents": a["cost"] or 0,
            "cost_per_item_cents": round((a["cost"] or 0) / t["complete"], 1) if t["complete"] else None,
            "mean_seconds": round(a["total_seconds"] / a["timed"], 1) if a["timed"] else None,
        })
    return out


def annotator_table(corpus: Corpus | None = None) -> list[dict]:
    """Per annotator: answers, cost, median seconds per answer, time of the last answer, gold-control
    accuracy, agreement with the final label (verification), blocked."""
    qs = Annotator.objects.all()
    answers = Answer.objects.all()
    if corpus is not None:
        answers = answers.filter(task__corpus=corpus)
        qs = qs.filter(answers__task__corpus=corpus).distinct()
    stats = {r["annotator_id"]: r for r in answers.values("annotator_id").annotate(
        n=Count("id"), cost=Sum("cost_cents"), last=Max("created"))}
    times: dict[int, list[float]] = defaultdict(list)
    for ann, sec in answers.filter(seconds__isnull=False).values_list("annotator_id", "seconds").iterator(chunk_size=5000):
        times[ann].append(sec)
    # agreement with the final label of completed verification tasks
    final = {}
    labs = Label.objects.all() if corpus is None else Label.objects.filter(corpus=corpus)
    for key, correct in labs.order_by("id").values_list("key", "correct"):
        final[key] = correct
    agree: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    ver = answers.filter(task__kind=Kind.VERIFY, task__is_control=False, task__status=Task.Status.COMPLETE)
    for ann, key, correct in ver.values_list("annotator_id", "task__key", "correct"):
        if key in final:
            agree[ann][0] += int(final[key] == correct)
            agree[ann][1] += 1
    rows = []
    for a in qs.order_by("backend", "external_id"):
        s = stats.get(a.pk, {})
        ag = agree.get(a.pk)
        rows.append({
            "id": a.pk, "annotator": str(a), "backend": a.backend, "answers": s.get("n", 0),
            "cost_cents": s.get("cost") or 0, "controls": a.controls_answered,
            "median_seconds": round(statistics.median(times[a.pk]), 1) if times.get(a.pk) else None,
            "last_answer": s["last"].isoformat() if s.get("last") else None,
            "control_accuracy": _num(a.control_accuracy),
            "agreement_with_label": _num(ag[0] / ag[1]) if ag and ag[1] else None,
            "blocked": a.blocked, "blocked_reason": a.blocked_reason,
        })
    return rows


def status(corpus: Corpus | None = None) -> dict:
    """Everything the organiser page and ``unpooled annotate status`` show."""
    from .actions import corpus_committed_cents, settings_for

    leased = Assignment.objects.filter(status=Assignment.Status.LEASED)
    if corpus is not None:
        leased = leased.filter(task__corpus=corpus)
    out = {
        "corpus": corpus.name if corpus is not None else None,
        "kinds": kind_summary(corpus),
        "agreement": verification_agreement(corpus),
        "annotators": annotator_table(corpus),
        "leased": leased.count(),
        "labels": (Label.objects.filter(corpus=corpus) if corpus else Label.objects).values("key_hash").distinct().count(),
    }
    if corpus is not None:
        st = settings_for(corpus)
        out["backend"] = st.backend
        out["budget_cents"] = st.budget_cents
        out["committed_cents"] = corpus_committed_cents(corpus)
    return out
