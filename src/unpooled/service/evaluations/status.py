"""What the pages and the API read of a submission's evaluation: the state of each level, the status page's
progress (labels, cost, time left), the newest score per level and what its figures replaced."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, F, Max, Q, Subquery, Sum
from django.utils import timezone

from unpooled.service.annotation.actions import settings_for
from unpooled.service.annotation.models import Answer, Assignment, ExhaustiveDocument, Kind, SubmissionBudget, Task
from unpooled.service.submissions.models import RelationInstance, Submission

from .lifecycle import STAGES, open_requests
from .models import Draw, Score, ScoreSnapshot
from .policy import SERVICE_LEVELS as LEVELS

Status = Submission.Status


LEVEL_STATE_LABELS = {"scored": "✓", "provisional": "provisional score",
                      "waiting": "waiting for labels", "none": "no instances at this level",
                      "todo": "not sampled yet", "failed": "failed"}


def level_states(subs) -> dict[int, list[dict]]:
    """Each submission of ``subs``: every level it is evaluated at, with its state.

    A level is ``scored`` (✓) once the submission is published with a score row for it; a level with a score
    before that is ``provisional`` (a label batch re-scores every submission with draws, so a submission still
    waiting for labels has scores that will move); ``none`` when its plan drew nothing (the system has no instances
    there), ``waiting`` (for labels) once it has draws, ``failed`` when the submission failed before its score, and
    ``todo`` before its draws.  The levels are those of the submission's sampling plan plus any scored one.  Two
    queries, whatever the number of submissions (the lists and the status page share this)."""
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
                state = "scored" if s.status == Status.PUBLISHED else "provisional"
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
    """The stage in a few words, in agreement with the levels' states: "scored and published" only when every
    level of the plan has its score; scores of a submission still waiting for labels are said to be provisional."""
    if sub.status == Status.PUBLISHED and any(r["state"] not in ("scored", "none") for r in levels):
        return "published, partly scored"
    if sub.status != Status.FAILED and any(r["state"] == "provisional" for r in levels):
        return f"{Status(sub.status).label}; the scores so far are provisional"
    return Status(sub.status).label


def attach_level_states(subs) -> list:
    """Set ``levels`` (see :func:`level_states`), ``stage_summary`` and ``headline`` on each submission of a list
    page: ``headline`` is the published score of its first level scored (the score its leaderboard shows: a frozen
    level's snapshot), None while no level is published.  Four queries for the list."""
    subs = list(subs)
    states = level_states(subs)
    scores = newest_scores_of(s.pk for s in subs)
    for s in subs:
        s.levels = states[s.pk]
        s.stage_summary = stage_summary(s, s.levels)
        final = [r["level"] for r in s.levels if r["state"] == "scored"]
        s.headline = scores.get(s.pk, {}).get(final[0]) if final else None
    return subs


#: no verification answer for this long: the time left is unknown, not the last hour's pace
IDLE_MINUTES = 10


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{round(seconds)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def time_left(corpus, backend: str, outstanding: int, *, now) -> tuple[int | None, str]:
    """The time the answers still to come will take, in seconds (None when unknown), and a sentence saying it.

    The pace is the last hour's answers to the corpus's verification items by annotators of the corpus's backend
    (a simulated crowd that answered before the corpus moved to in-house annotators sets no pace for them), and
    only while somebody works the queue: one of them answered in the last :data:`IDLE_MINUTES` minutes or holds a
    live lease of an open item."""
    from unpooled.service.crowd.base import WHO

    if outstanding == 0:
        return 0, "none: no answer is still to come"
    who = WHO.get(backend, backend)
    answers = Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, annotator__backend=backend,
                                    created__gte=now - timedelta(hours=1))
    working = (answers.filter(created__gte=now - timedelta(minutes=IDLE_MINUTES)).exists()
               or Assignment.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, task__status=Task.Status.OPEN,
                                            annotator__backend=backend, status=Assignment.Status.LEASED,
                                            expires__gte=now).exists())
    if not working:
        return None, (f"unknown: nobody is working on this corpus's queue (no answer from its {who} in the last "
                      f"{IDLE_MINUTES} minutes, and no item held)")
    recent = answers.count()
    if not recent:
        return None, f"unknown: its {who} have started, but none has answered yet"
    eta = outstanding / (recent / 3600.0)
    return round(eta), (f"about {_duration(eta)}, at the last hour's pace of its {who} ({recent} answer"
                        f"{'s' if recent != 1 else ''})")


def _before_asking(sub: Submission) -> bool:
    """Whether ``sub`` has not asked for its labels yet (its draws without an item are then not over the budget)."""
    return sub.status in (Status.INGESTED, Status.SAMPLING)


def label_origins(sub: Submission) -> list[dict]:
    """Where the labels ``sub`` needs come from: its distinct drawn keys (at any level) in four parts that add up
    to them, each with ``n`` keys and ``got`` of them labelled: ``new`` (items it asked for and pays), ``reused``
    (labelled by the pool, or by an item another submission asked for), ``joined`` (an open item another submission
    asked for, not labelled yet) and ``unasked`` (no item: over the budget, or not asked yet).  One query."""
    from .publish import flagged_draws

    parts = {k: {"part": k, "n": 0, "got": 0} for k in ("new", "reused", "joined", "unasked")}
    for _, paid, asked, labelled in (flagged_draws(sub.corpus).filter(submission=sub).order_by()
                                     .values_list("key", "paid", "asked", "labelled").distinct()):
        part = parts["new" if paid else "reused" if labelled else "joined" if asked else "unasked"]
        part["n"] += 1
        part["got"] += bool(labelled)
    early = _before_asking(sub)
    words = {"new": "new items this submission asked for (and pays)",
             "reused": "reused: labelled already, in the pool or by an item another submission asked for",
             "joined": "joined: an open item another submission asked for",
             "unasked": "not asked yet" if early else "not asked: over the budget"}
    return [{**p, "label": words[k]} for k, p in parts.items()]


def _draws(sub: Submission, levels: list[str]) -> list[dict]:
    """Per level with draws: the draws (with replacement: an instance may be drawn again), the distinct instances
    drawn and how many of those are labelled."""
    from .publish import flagged_draws

    rows = (flagged_draws(sub.corpus).filter(submission=sub).order_by().values("level").annotate(
        draws=Count("id"), distinct=Count("instance_id", distinct=True),
        labelled=Count("instance_id", distinct=True, filter=Q(labelled=True))))
    got = {r["level"]: r for r in rows}
    return [got[lv] for lv in levels if lv in got]


def progress(sub: Submission, *, now=None) -> dict:
    """What the status page shows: stage and levels (in agreement), labels received / needed and where they come
    from (parts that add up), the draws per level, answers to come, cost so far, time left."""
    from unpooled.service.crowd.base import WHO

    now = now or timezone.now()
    corpus = sub.corpus
    st = settings_for(corpus)
    own = SubmissionBudget.objects.filter(submission=sub).first()
    budget = own.limit_cents if own is not None else st.submission_budget_cents
    origins = label_origins(sub)
    by = {p["part"]: p for p in origins}
    open_tasks = open_requests(sub).annotate(got=Count("answers", filter=Q(answers__weight__gt=0)))
    outstanding = max(0, open_tasks.aggregate(n=Sum(F("answers_needed") - F("got")))["n"] or 0)
    cost = (Answer.objects.filter(task__requests__submission=sub, task__requests__committed_cents__gt=0)
            .aggregate(s=Sum("cost_cents"))["s"] or 0)
    eta, eta_words = time_left(corpus, st.backend, outstanding, now=now)
    ex = ExhaustiveDocument.objects.filter(corpus=corpus)
    ex_done = Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", status=Task.Status.COMPLETE,
                                  document_id__in=Subquery(ex.values("document_id"))).count()
    order = [s.value for s in STAGES]
    at = sub.failed_stage if sub.status == Status.FAILED else sub.status
    steps = [{"stage": s.value, "label": s.label,
              "state": ("failed" if sub.status == Status.FAILED and s.value == at else
                        "done" if at in order and order.index(s.value) < order.index(at) or sub.status == Status.PUBLISHED
                        else "current" if s.value == at else "todo")} for s in STAGES]
    plan = sub.plan or {}
    levels = level_states([sub])[sub.pk]
    draws = _draws(sub, [r["level"] for r in levels])
    return {
        "submission": sub.pk, "status": sub.status, "status_label": stage_summary(sub, levels), "levels": levels,
        "provisional": any(r["state"] == "provisional" for r in levels),
        "failed_stage": sub.failed_stage, "error": sub.error, "steps": steps,
        "status_changed": sub.status_changed.isoformat() if sub.status_changed else None,
        "instances": RelationInstance.objects.filter(submission=sub).count(),
        "draws": {r["level"]: r["draws"] for r in draws}, "draws_detail": draws,
        "plan": {k: v for k, v in plan.items() if k in LEVELS},
        "labels_needed": sum(p["n"] for p in origins), "labels_received": sum(p["got"] for p in origins),
        "label_origins": origins, "labels_new": by["new"]["n"], "labels_reused": by["reused"]["n"],
        "labels_joined": by["joined"]["n"], "over_budget": 0 if _before_asking(sub) else by["unasked"]["n"],
        "more_answers": (plan.get("labels") or {}).get("more_answers", 0),
        "more_answers_cost": f"${(plan.get('labels') or {}).get('more_answers_cents', 0) / 100:,.2f}",
        "answers_outstanding": outstanding, "cost_cents": int(cost), "cost": f"${cost / 100:,.2f}",
        "budget_cents": budget, "budget": None if budget is None else f"${budget / 100:,.2f}",
        "eta_seconds": eta, "time_left": eta_words,
        "backend": st.backend, "backend_label": WHO.get(st.backend, st.backend),
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
    return newest_scores_of([sub.pk]).get(sub.pk, {})


def newest_scores_of(ids) -> dict[int, dict[str, Score]]:
    """:func:`newest_scores` of each submission id of ``ids``, in two queries whatever their number."""
    ids = list(ids)
    # a GROUP BY over the (submission, level, id) index: a correlated subquery per score row cost 4 ms on PostgreSQL
    newest = Score.objects.filter(id__in=Score.objects.filter(submission_id__in=ids).order_by()
                                  .values("submission_id", "level").annotate(m=Max("id")).values("m"))
    out: dict[int, dict[str, Score]] = {}
    for s in newest:
        s.frozen = None
        out.setdefault(s.submission_id, {})[s.level] = s
    for snap in ScoreSnapshot.objects.filter(submission_id__in=ids, score__isnull=False).select_related("score"):
        out.setdefault(snap.submission_id, {})[snap.level] = snap.score
        snap.score.frozen = snap.frozen
    # in the levels' order (instance, relation, entity), as everywhere else
    order = lambda lv: (LEVELS.index(lv) if lv in LEVELS else len(LEVELS), lv)  # noqa: E731
    return {pk: {lv: by[lv] for lv in sorted(by, key=order)} for pk, by in out.items()}
