"""What the pages and the API read of a submission's evaluation: the state of each level, the status page's
progress (labels, cost, time left), the newest score per level and what its figures replaced."""

from __future__ import annotations

import math
from datetime import timedelta

from django.db.models import Count, F, Max, Q, Subquery, Sum
from django.utils import timezone

from unpooled.service.annotation.actions import settings_for
from unpooled.service.annotation.models import Answer, ExhaustiveDocument, Kind, Label, SubmissionBudget, Task
from unpooled.service.submissions.models import Submission

from .lifecycle import STAGES, open_requests
from .models import Draw, Score, ScoreSnapshot
from .policy import SERVICE_LEVELS as LEVELS

Status = Submission.Status


LEVEL_STATE_LABELS = {"scored": "✓", "waiting": "waiting for labels", "none": "no instances at this level",
                      "todo": "not sampled yet", "failed": "failed"}


def level_states(subs) -> dict[int, list[dict]]:
    """Each submission of ``subs``: every level it is evaluated at, with its state.

    A level is ``scored`` once a score row exists for it, ``none`` when its plan drew nothing (the system has no
    instances there), ``waiting`` (for labels) once it has draws, ``failed`` when the submission failed before its
    score, and ``todo`` before its draws.  The levels are those of the submission's sampling plan plus any scored
    one.  Two queries, whatever the number of submissions (the lists and the status page share this)."""
    subs = list(subs)
    ids = [s.pk for s in subs]
    scored = set(Score.objects.filter(submission_id__in=ids).order_by().values_list("submission_id", "level").distinct())
    drawn = set(Draw.objects.filter(submission_id__in=ids).order_by().values_list("submission_id", "level").distinct())
    out = {}
    for s in subs:
        plan = s.plan or {}
        levels = [lv for lv in LEVELS if lv in plan or (s.pk, lv) in scored]
        rows = []
        for lv in levels:
            if (s.pk, lv) in scored:
                state = "scored"
            elif isinstance(plan.get(lv), dict) and not plan[lv].get("draws"):
                state = "none"
            elif s.status == Status.FAILED:
                state = "failed"
            elif (s.pk, lv) in drawn:
                state = "waiting"
            else:
                state = "todo"
            rows.append({"level": lv, "state": state, "label": LEVEL_STATE_LABELS[state]})
        out[s.pk] = rows
    return out


def stage_summary(sub: Submission, levels: list[dict]) -> str:
    """The stage in a few words: "scored and published" only when every level of the plan has its score."""
    if sub.status == Status.PUBLISHED and any(r["state"] not in ("scored", "none") for r in levels):
        return "published, partly scored"
    return Status(sub.status).label


def attach_level_states(subs) -> list:
    """Set ``levels`` (see :func:`level_states`) and ``stage_summary`` on each submission of a list page."""
    subs = list(subs)
    states = level_states(subs)
    for s in subs:
        s.levels = states[s.pk]
        s.stage_summary = stage_summary(s, s.levels)
    return subs


#: no verification answer for this long: the time left is unknown, not the last hour's pace
IDLE_MINUTES = 10


def progress(sub: Submission, *, now=None) -> dict:
    """What the status page shows: stage, labels received / needed, cost so far, time left."""
    now = now or timezone.now()

    corpus = sub.corpus
    st = settings_for(corpus)
    own = SubmissionBudget.objects.filter(submission=sub).first()
    budget = own.limit_cents if own is not None else st.submission_budget_cents
    draws = Draw.objects.filter(submission=sub)
    keys = draws.values("key_hash").distinct()
    needed = keys.count()
    received = (Label.objects.filter(corpus=corpus, key_hash__in=Subquery(draws.values("key_hash")))
                .values("key_hash").distinct().count())
    open_tasks = open_requests(sub).annotate(got=Count("answers", filter=Q(answers__weight__gt=0)))
    outstanding = max(0, open_tasks.aggregate(n=Sum(F("answers_needed") - F("got")))["n"] or 0)
    cost = (Answer.objects.filter(task__requests__submission=sub, task__requests__committed_cents__gt=0)
            .aggregate(s=Sum("cost_cents"))["s"] or 0)
    answers = Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, created__gte=now - timedelta(hours=1))
    recent = answers.count()
    rate = recent / 3600.0
    eta = None
    if outstanding == 0:
        eta = 0.0
    elif rate > 0 and answers.filter(created__gte=now - timedelta(minutes=IDLE_MINUTES)).exists():
        # the last hour's pace, while somebody is still answering (an in-house queue nobody works on has no ETA)
        eta = outstanding / rate
    ex = ExhaustiveDocument.objects.filter(corpus=corpus)
    ex_done = Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, status=Task.Status.COMPLETE,
                                  document_id__in=Subquery(ex.values("document_id"))).count()
    order = [s.value for s in STAGES]
    at = sub.failed_stage if sub.status == Status.FAILED else sub.status
    steps = [{"stage": s.value, "label": s.label,
              "state": ("failed" if sub.status == Status.FAILED and s.value == at else
                        "done" if at in order and order.index(s.value) < order.index(at) or sub.status == Status.PUBLISHED
                        else "current" if s.value == at else "todo")} for s in STAGES]
    plan = sub.plan or {}
    levels = level_states([sub])[sub.pk]
    return {
        "submission": sub.pk, "status": sub.status, "status_label": stage_summary(sub, levels), "levels": levels,
        "failed_stage": sub.failed_stage, "error": sub.error, "steps": steps,
        "status_changed": sub.status_changed.isoformat() if sub.status_changed else None,
        "draws": {lv: draws.filter(level=lv).count() for lv in LEVELS if lv in st.levels},
        "plan": {k: v for k, v in plan.items() if k in LEVELS},
        "labels_needed": needed, "labels_received": received,
        "labels_new": (plan.get("labels") or {}).get("new", 0),
        "labels_reused": (plan.get("labels") or {}).get("reused", 0) + (plan.get("labels") or {}).get("joined", 0),
        "over_budget": (plan.get("labels") or {}).get("over_budget", 0),
        "more_answers": (plan.get("labels") or {}).get("more_answers", 0),
        "more_answers_cost": f"${(plan.get('labels') or {}).get('more_answers_cents', 0) / 100:,.2f}",
        "answers_outstanding": outstanding, "cost_cents": int(cost), "cost": f"${cost / 100:,.2f}",
        "budget_cents": budget, "budget": None if budget is None else f"${budget / 100:,.2f}",
        "eta_seconds": None if eta is None or math.isinf(eta) else round(eta),
        "backend": st.backend,
        "exhaustive_documents": ex.count(), "exhaustive_done": ex_done,
        "done": sub.status in (Status.PUBLISHED, Status.FAILED),
    }


#: the published figures of a score, as every page rounds them (3 decimals)
SHOWN = ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi")


#: how far back :func:`score_change` looks for the previous figures (re-scoring writes a score per label batch)
CHANGE_LOOKBACK = 500


def score_change(score: Score) -> dict | None:
    """What ``score``'s figures replaced: the newest earlier score of the same submission and level whose shown
    figures (:data:`SHOWN`, to 3 decimals) differ, as ``{"previous": {figure: value}, "previous_created",
    "changed"}``, ``changed`` being when the current figures appeared (the first later score that has them);
    None when no earlier score (of the last :data:`CHANGE_LOOKBACK`) differs."""
    def shown(row):
        return tuple(None if row[k] is None else round(row[k], 3) for k in SHOWN)

    now = shown({k: getattr(score, k) for k in SHOWN})
    changed = score.created
    for row in (Score.objects.filter(submission_id=score.submission_id, level=score.level, id__lt=score.pk)
                .order_by("-id").values("created", *SHOWN)[:CHANGE_LOOKBACK]):
        if shown(row) != now:
            return {"previous": {k: row[k] for k in SHOWN}, "previous_created": row["created"], "changed": changed}
        changed = row["created"]
    return None


def newest_scores(sub: Submission) -> dict[str, Score]:
    """The newest score per level; a frozen level's snapshot (its period closed: :mod:`.periods`), with
    ``frozen`` (the time) set on it (``None`` on the others)."""
    # a GROUP BY over the (submission, level, id) index: a correlated subquery per score row cost 4 ms on PostgreSQL
    newest = Score.objects.filter(id__in=Score.objects.filter(submission=sub).order_by().values("level")
                                  .annotate(m=Max("id")).values("m"))
    out = {s.level: s for s in newest}
    for s in out.values():
        s.frozen = None
    for snap in ScoreSnapshot.objects.filter(submission=sub).select_related("score"):
        out[snap.level] = snap.score
        snap.score.frozen = snap.frozen
    # in the levels' order (instance, relation, entity), as everywhere else
    return {lv: out[lv] for lv in sorted(out, key=lambda lv: (LEVELS.index(lv) if lv in LEVELS else len(LEVELS), lv))}
