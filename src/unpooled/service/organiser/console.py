"""What the organiser console shows and does, as plain functions (the views only render them).

Reading: :func:`alerts` (failed and stuck submissions, stalled tasks, budgets), :func:`stalled_tasks`,
:func:`corpus_budget`, :func:`submission_rows` (lifecycle stage and cost against budget per
submission), :func:`team_rows` (quotas and usage).

Writing, ``check_*`` then ``do_*``: :func:`do_update_settings` (a corpus's
:class:`~unpooled.service.annotation.models.AnnotationSettings`), :func:`do_retry` (resume a
failed submission), :func:`do_team_quota` (a team's submission quotas).  Every ``check_*``
raises :class:`ConsoleError`; :class:`SettingsError` carries one message per field.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q, Sum
from django.utils import timezone

from unpooled.core.errors import InvalidInputError, UnpooledError
from unpooled.service.accounts.actions import AccountError, do_set_quota, is_organiser, quota
from unpooled.service.annotation.actions import corpus_committed_cents, do_set_recall_protocol, settings_for
from unpooled.service.annotation.leasing import active_annotators, unreachable_items
from unpooled.service.annotation.sampling import sample_size_warning
from unpooled.service.annotation.status import partial_annotators
from unpooled.service.annotation.models import (
    AnnotationSettings, Answer, Assignment, Backend, ExhaustiveDocument, Kind, SubmissionBudget, Task, TaskRequest,
)
from unpooled.service.corpora.models import Corpus
from unpooled.service.crowd.mturk_sync import held_back, held_back_sentence
from unpooled.service.submissions.models import Submission, Team
from unpooled.service.evaluations.policy import SERVICE_LEVELS as LEVELS
from unpooled.service.evaluations.tasks import keep_settling

#: a task whose leases expired this often without an answer is stalled
STALL_EXPIRIES = 3
#: a task open this long with no counted answer is stalled
STALL_OPEN_HOURS = 24
#: a submission in ``annotating`` without an answer to its tasks for this long is stuck
STUCK_MINUTES = 60
#: committed share of the corpus budget from which the console warns
BUDGET_WARN_SHARE = 0.9

#: the settings an organiser edits in the console (the rest stays in the Django admin)
SETTINGS_FIELDS = (
    "backend", "answers_per_item", "answers_weak_relation", "relation_groups", "lease_seconds", "reward_verify_cents", "reward_entities_cents",
    "reward_relations_cents", "reward_clusters_cents", "budget_cents", "submission_budget_cents", "control_share",
    "block_below_accuracy", "block_min_controls", "aggregation", "target_halfwidth", "min_draws", "max_draws",
    "exhaustive_documents", "levels", "open_signup", "gold_public", "recall_protocol",
)
MAX_ANSWERS_PER_ITEM = 20
#: the most an answer may pay ($1,000) and a budget hold (the largest integer every database stores in these fields):
#: the same bounds on SQLite and PostgreSQL, where the field's own range differs
MAX_REWARD_CENTS = 100_000
MAX_BUDGET_CENTS = 2**31 - 1
MIN_LEASE_SECONDS = 60


class ConsoleError(UnpooledError):
    """A console request that is refused; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class SettingsError(ConsoleError):
    """Invalid annotation settings: ``errors`` maps each field to what is wrong with it."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def check_organiser(user) -> None:
    if not is_organiser(user):
        raise ConsoleError("only organisers may do this", status=403)


# ---------------------------------------------------------------------------- alerts

@dataclass(frozen=True)
class Alert:
    """One line at the top of the console. ``level`` is ``error`` or ``warning``; ``code`` is stable."""

    level: str
    code: str
    message: str
    submission: int | None = None
    section: str = "annotation"  # the console section with the details

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def stalled_tasks(corpus: Corpus, *, now=None, expiries: int = STALL_EXPIRIES, open_hours: float = STALL_OPEN_HOURS,
                  limit: int = 50) -> dict:
    """Open tasks that do not move.

    ``expired``: tasks whose leases expired at least ``expiries`` times (annotators take them and
    give up: the item may be unclear or the page broken); ``unanswered``: tasks open for more
    than ``open_hours`` with no counted answer (nobody works on the corpus, or the backend does
    not publish).  Each list is oldest first, at most ``limit`` rows; ``n_expired`` and
    ``n_unanswered`` are the full counts.
    """
    now = now or timezone.now()
    open_ = Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False)
    gone = (Q(assignments__status=Assignment.Status.EXPIRED)
            | Q(assignments__status=Assignment.Status.LEASED, assignments__expires__lt=now))
    expired = (open_.annotate(expired=Count("assignments", filter=gone, distinct=True),
                              got=Count("answers", filter=Q(answers__weight__gt=0), distinct=True))
               .filter(expired__gte=expiries).select_related("document").order_by("priority", "id"))
    unanswered = (open_.filter(created__lt=now - timedelta(hours=open_hours))
                  .annotate(got=Count("answers", filter=Q(answers__weight__gt=0)))
                  .filter(got=0).select_related("document").order_by("created", "id"))

    def rows(qs, with_expired: bool):
        return [{"task": t.pk, "kind": t.kind, "doc": t.document.doc_id, "group": t.group,
                 "answers": t.got, "answers_needed": t.answers_needed, "created": t.created,
                 "expired": t.expired if with_expired else None} for t in qs[:limit]]

    return {"expired": rows(expired, True), "n_expired": expired.count(),
            "unanswered": rows(unanswered, False), "n_unanswered": unanswered.count(),
            "expiries": expiries, "open_hours": open_hours}


def stuck_submissions(corpus: Corpus, *, now=None, minutes: float = STUCK_MINUTES) -> list[tuple[Submission, bool]]:
    """Submissions in ``annotating`` for more than ``minutes`` with no answer to their tasks in the
    last ``minutes``; with whether they still wait for open verification tasks."""
    now = now or timezone.now()
    since = now - timedelta(minutes=minutes)
    out = []
    subs = (Submission.objects.filter(corpus=corpus, status=Submission.Status.ANNOTATING)
            .filter(Q(status_changed__lt=since) | Q(status_changed__isnull=True, created__lt=since))
            .select_related("team").order_by("created", "id"))
    for sub in subs:
        if Answer.objects.filter(task__requests__submission=sub, created__gte=since).exists():
            continue
        waiting = Task.objects.filter(requests__submission=sub, kind=Kind.VERIFY, status=Task.Status.OPEN).exists()
        out.append((sub, waiting))
    return out


def alerts(corpus: Corpus, *, now=None, expiries: int = STALL_EXPIRIES, open_hours: float = STALL_OPEN_HOURS,
           stuck_minutes: float = STUCK_MINUTES, stalled: dict | None = None) -> list[Alert]:
    """Everything an organiser should act on, errors first."""
    now = now or timezone.now()
    ann = settings_for(corpus)
    out: list[Alert] = []
    for sub in (Submission.objects.filter(corpus=corpus, status=Submission.Status.FAILED)
                .select_related("team").order_by("-status_changed", "-id")):
        first = (sub.error or "no error recorded").strip().splitlines()[-1][:300]
        out.append(Alert("error", "failed_submission",
                         f"submission {sub.pk} ({sub.team.name}/{sub.run_id}) failed at stage "
                         f"{sub.failed_stage or 'unknown'}: {first}", submission=sub.pk, section="submissions"))
    for sub, waiting in stuck_submissions(corpus, now=now, minutes=stuck_minutes):
        why = (f"waits for open verification tasks but got no answer in the last {stuck_minutes:g} minutes "
               f"(backend {ann.backend}: is anybody annotating, are the tasks published?)"
               if waiting else
               "has all its labels but has not moved on to scoring (is a task worker running?)")
        out.append(Alert("warning", "stuck_submission",
                         f"submission {sub.pk} ({sub.team.name}/{sub.run_id}) is annotating and {why}",
                         submission=sub.pk, section="submissions"))
    st = stalled if stalled is not None else stalled_tasks(corpus, now=now, expiries=expiries, open_hours=open_hours,
                                                           limit=0)
    if st["n_expired"]:
        out.append(Alert("warning", "expired_repeatedly",
                         f"{st['n_expired']} open task(s) leased and expired {expiries} times or more without an "
                         "answer: check the items and their pages"))
    if st["n_unanswered"]:
        out.append(Alert("warning", "open_unanswered",
                         f"{st['n_unanswered']} task(s) open for more than {open_hours:g} hours with no answer"))
    short = _waiting_for_annotators(corpus, ann)
    if short:
        out.append(Alert("warning", "waiting_for_annotators", short, section="annotation"))
    for f in partial_annotators(corpus):
        said, others = ("correct", "wrong") if f["direction"] == "favours" else ("wrong", "correct")
        out.append(Alert("warning", "partial_annotator",
                         f"annotator {f['annotator']} said {said} to {f['against']} of the {f['chances']} items of "
                         f"team {f['team']} that the other annotators judged {others} (their rate on other teams' "
                         f"items {f['rate_elsewhere']:.0%}, the other annotators' on this team's "
                         f"{f['rate_others']:.0%}; p = {f['p_value']:.1g}): a tie to the team? Ask them; block them, "
                         "or add the team to their conflicts", section="annotation"))
    held = held_back_sentence(held_back(corpus, ann)) if ann.backend == Backend.MTURK else ""
    if held:
        out.append(Alert("warning", "hits_wait_for_budget", held, section="settings"))
    if ann.gold_public and ann.control_share > 0 and ann.backend != Backend.SIMULATED and corpus.has_gold:
        out.append(Alert("warning", "gold_controls_readable",
                         "the gold controls are drawn from the gold layer, which everyone can read on the document "
                         "pages: an annotator who looks their answers up passes every control and is never blocked. "
                         "Make the gold layer private in the settings (gold public: off), unless it is published "
                         "anyway", section="settings"))
    waiting = Team.objects.filter(approved=False).count()
    if waiting:
        out.append(Alert("warning", "teams_waiting", f"{waiting} team(s) wait for your approval before they may "
                         "submit", section="teams"))
    few = sample_size_warning(corpus, ann.exhaustive_documents)
    if few:
        drawn = ExhaustiveDocument.objects.filter(corpus=corpus).exists()
        out.append(Alert("warning", "few_exhaustive_documents", few, section="documents" if drawn else "settings"))
    b = corpus_budget(corpus)
    if b["budget_cents"] is not None:
        if b["committed_cents"] >= b["budget_cents"]:
            out.append(Alert("error", "budget_spent",
                             f"committed {_money(b['committed_cents'])} of the corpus budget "
                             f"{_money(b['budget_cents'])}: no new task is created until the budget is raised",
                             section="settings"))
        elif b["committed_cents"] >= BUDGET_WARN_SHARE * b["budget_cents"]:
            out.append(Alert("warning", "budget_nearly_spent",
                             f"committed {_money(b['committed_cents'])} of the corpus budget "
                             f"{_money(b['budget_cents'])} ({b['committed_share']:.0%})", section="settings"))
    out.sort(key=lambda a: a.level != "error")
    return out


def _waiting_for_annotators(corpus: Corpus, st: AnnotationSettings) -> str | None:
    """In-house only (a simulated crowd closes such items itself, an MTurk pool is open): the open items that every
    active annotator has answered and that still ask for more answers (:func:`~unpooled.service.annotation.leasing.
    unreachable_items`); they wait for a new annotator.  ``st``: the corpus's settings."""
    if st.backend != Backend.INHOUSE:
        return None
    live = active_annotators(corpus, Backend.INHOUSE)
    n = unreachable_items(corpus, live).count()
    if not n:
        return None
    return (f"{n} open item(s) ask for more answers than the {len(live)} unblocked in-house annotator(s) who have "
            "answered this corpus can give (each has answered them): they wait for another annotator. Invite one, "
            f"or lower the answers asked of a weak relation's items (now {st.answers_weak_relation}) in Settings")


def _money(cents: int | None) -> str:
    return "-" if cents is None else f"${cents / 100:,.2f}"


# ---------------------------------------------------------------------------- cost

def _share(part: int, whole: int | None) -> float | None:
    if not whole:
        return None
    return part / whole


def corpus_budget(corpus: Corpus) -> dict:
    """Cost spent (answers paid), outstanding (expected cost of the answers still missing) and
    committed (both) against the corpus budget; shares are of the budget (None: no cap)."""
    spent = Answer.objects.filter(task__corpus=corpus).aggregate(s=Sum("cost_cents"))["s"] or 0
    committed = corpus_committed_cents(corpus)
    st = settings_for(corpus)
    budget = st.budget_cents
    return {"simulated": st.backend == Backend.SIMULATED,
            "spent_cents": spent, "outstanding_cents": committed - spent, "committed_cents": committed,
            "budget_cents": budget, "spent_share": _share(spent, budget), "committed_share": _share(committed, budget),
            "bar": _bar(spent, committed, budget)}


def _bar(spent: int, committed: int, budget: int | None) -> dict:
    """Widths in percent of a bar whose full length is the budget (or the commitment without a cap)."""
    whole = budget if budget else max(committed, 1)
    spent_pct = min(100.0, 100.0 * spent / whole)
    committed_pct = min(100.0, 100.0 * committed / whole)
    return {"spent": round(spent_pct, 1), "outstanding": round(max(0.0, committed_pct - spent_pct), 1),
            "over": budget is not None and committed > budget}


def submission_rows(corpus: Corpus, *, limit: int = 500) -> list[dict]:
    """Each submission of the corpus, newest first: lifecycle stage (and error), open verification
    tasks, cost spent on the tasks it created, cost committed, and its budget (its own
    :class:`SubmissionBudget` or the corpus default)."""
    subs = list(Submission.objects.filter(corpus=corpus).select_related("team").order_by("-created", "-id")[:limit])
    ids = [s.pk for s in subs]
    committed = dict(TaskRequest.objects.filter(submission_id__in=ids).values("submission_id")
                     .annotate(s=Sum("committed_cents")).values_list("submission_id", "s"))
    spent = dict(Answer.objects.filter(task__requests__submission_id__in=ids, task__requests__committed_cents__gt=0)
                 .values("task__requests__submission_id").annotate(s=Sum("cost_cents"))
                 .values_list("task__requests__submission_id", "s"))
    open_ = dict(Task.objects.filter(requests__submission_id__in=ids, kind=Kind.VERIFY, status=Task.Status.OPEN)
                 .values("requests__submission_id").annotate(n=Count("id")).values_list("requests__submission_id", "n"))
    own = dict(SubmissionBudget.objects.filter(submission_id__in=ids).values_list("submission_id", "limit_cents"))
    default = settings_for(corpus).submission_budget_cents
    from unpooled.service.evaluations.status import level_states, stage_summary

    states = level_states(subs)
    rows = []
    for s in subs:
        budget = own.get(s.pk, default)
        c, sp = committed.get(s.pk) or 0, spent.get(s.pk) or 0
        rows.append({
            "pk": s.pk, "team": s.team.name, "run": s.run_id, "status": s.status,
            "status_label": stage_summary(s, states[s.pk]), "levels": states[s.pk], "failed_stage": s.failed_stage, "error": s.error,
            "status_changed": s.status_changed, "created": s.created, "visibility": s.visibility,
            "open_tasks": open_.get(s.pk, 0), "spent_cents": sp, "committed_cents": c, "budget_cents": budget,
            "budget_source": "own" if s.pk in own else ("corpus default" if default is not None else None),
            "bar": _bar(sp, c, budget), "can_retry": s.status == Submission.Status.FAILED,
        })
    return rows


# ---------------------------------------------------------------------------- teams

def team_rows(*, now=None) -> list[dict]:
    """Every team with its quotas (its own or the site default) and what it used."""
    now = now or timezone.now()
    members = dict(Team.objects.annotate(n=Count("members")).values_list("pk", "n"))
    rows = []
    for team in Team.objects.order_by("name"):
        q = quota(team, now=now)
        rows.append({"team": team, "pk": team.pk, "name": team.name, "members": members.get(team.pk, 0),
                     "approved": team.approved,
                     "own_per_day": team.quota_per_day, "own_total": team.quota_total,
                     "quota": q, "per_day_default": team.quota_per_day is None,
                     "total_default": team.quota_total is None})
    return rows


def check_team_quota(user, team: Team, *, per_day: int | None, total: int | None) -> None:
    check_organiser(user)
    for name, v in (("per_day", per_day), ("total", total)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ConsoleError(f"{name}: expected a non-negative integer or nothing (the site default), got {v!r}")


def do_team_quota(user, team: Team, *, per_day: int | None, total: int | None) -> Team:
    """Set a team's quotas (``None``: the site default)."""
    check_team_quota(user, team, per_day=per_day, total=total)
    try:
        return do_set_quota(team, per_day=per_day, total=total)
    except AccountError as exc:
        raise ConsoleError(str(exc)) from None


def do_approve_team(user, team: Team, *, approved: bool = True) -> Team:
    """Let a team submit (``approved``), or stop it until approved again."""
    check_organiser(user)
    Team.objects.filter(pk=team.pk).update(approved=approved)
    team.approved = approved
    return team


# ---------------------------------------------------------------------------- lifecycle

def check_retry(user, sub: Submission) -> None:
    check_organiser(user)
    if sub.status != Submission.Status.FAILED:
        raise ConsoleError(f"submission {sub.pk} has not failed (it is {Submission.Status(sub.status).label}); "
                           "only a failed submission can be retried", status=409)


def do_retry(user, sub: Submission) -> str:
    """Resume a failed submission at the stage that failed; returns that stage."""
    from unpooled.service.evaluations import tasks

    check_retry(user, sub)
    tasks.retry(sub)
    return sub.status


# ---------------------------------------------------------------------------- settings

MAX_RELATION_GROUPS_CHARS = 20_000


def _relation_groups_error(corpus: Corpus, v: dict) -> str | None:
    """What is wrong with the relation groups in ``v`` (None: nothing; an absent value becomes no groups)."""
    from unpooled.core.annotation.relation_groups import parse_relation_groups

    if v.get("relation_groups") is None:
        v["relation_groups"] = ""
    groups = v["relation_groups"]
    if not isinstance(groups, str):
        return f"expected text, got {type(groups).__name__}"
    if len(groups) > MAX_RELATION_GROUPS_CHARS:  # a schema's relations, each in one group, fit many times over
        return f"relation groups: {len(groups):,} characters; at most {MAX_RELATION_GROUPS_CHARS:,}"
    try:
        parse_relation_groups(groups, [r.name for r in corpus.schema.schema().canonical_relations])
    except InvalidInputError as exc:
        return str(exc)
    return None


def _check_money(v: dict, backend, need, num) -> None:
    """:func:`check_settings`' rules on rewards and budgets (``need`` and ``num`` are its own)."""
    for f in ("reward_verify_cents", "reward_entities_cents", "reward_relations_cents", "reward_clusters_cents"):
        r = num(f)
        need(f, r is not None and 0 <= r <= MAX_REWARD_CENTS,
             f"expected a number of cents from 0 to {MAX_REWARD_CENTS:,}, got {v.get(f)!r}")
        if backend == Backend.MTURK:
            need(f, r is not None and r >= 1, "Mechanical Turk pays at least 1 cent per assignment")
    for f in ("budget_cents", "submission_budget_cents"):
        b = v.get(f)
        need(f, b is None or (num(f) is not None and 0 <= b <= MAX_BUDGET_CENTS),
             f"expected a number of cents from 0 to {MAX_BUDGET_CENTS:,} or nothing (no cap), got {b!r}")
    # Mechanical Turk spends real money: a corpus open to it has a ceiling (security review N7: teams are cheap to
    # make, so a per-team quota alone bounds nothing)
    need("budget_cents", backend != Backend.MTURK or num("budget_cents") is not None,
         "Mechanical Turk spends money: give the corpus a budget (cents) before choosing it")
    if num("budget_cents") is not None and num("submission_budget_cents") is not None:
        need("submission_budget_cents", v["submission_budget_cents"] <= v["budget_cents"],
             f"{v['submission_budget_cents']} cents per submission exceeds the corpus budget of "
             f"{v['budget_cents']} cents")


def check_settings(corpus: Corpus, values: dict) -> dict:
    """Validate new annotation settings for ``corpus``; returns them normalised.

    ``values`` holds :data:`SETTINGS_FIELDS` (typed: ints, floats, None for an empty budget).
    Raises :class:`SettingsError` naming every invalid field.
    """
    errors: dict[str, str] = {}
    v = dict(values)

    def need(name: str, ok: bool, msg: str) -> None:
        if not ok and name not in errors:
            errors[name] = msg

    def num(name: str):
        x = v.get(name)
        return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None

    missing = [f for f in SETTINGS_FIELDS if f not in v]
    for f in missing:
        errors[f] = "required"
    backend = v.get("backend")
    need("backend", backend in Backend.values, f"expected one of {', '.join(Backend.values)}, got {backend!r}")
    need("backend", backend != Backend.SIMULATED or corpus.has_gold,
         f"the simulated crowd answers from the gold layer, and corpus {corpus.name} has none")
    k = num("answers_per_item")
    need("answers_per_item", k is not None and 1 <= k <= MAX_ANSWERS_PER_ITEM,
         f"expected an integer from 1 to {MAX_ANSWERS_PER_ITEM}, got {v.get('answers_per_item')!r}")
    kw = num("answers_weak_relation")
    need("answers_weak_relation", kw is not None and 0 <= kw <= MAX_ANSWERS_PER_ITEM and int(kw) == kw,
         f"expected an integer from 0 to {MAX_ANSWERS_PER_ITEM} (0: answers per item), "
         f"got {v.get('answers_weak_relation')!r}")
    err = _relation_groups_error(corpus, v)
    need("relation_groups", err is None, err or "")
    lease = num("lease_seconds")
    need("lease_seconds", lease is not None and lease >= MIN_LEASE_SECONDS,
         f"expected at least {MIN_LEASE_SECONDS} seconds, got {v.get('lease_seconds')!r}")
    _check_money(v, backend, need, num)
    share = num("control_share")
    need("control_share", share is not None and 0 <= share < 1,
         f"expected a share in [0, 1), got {v.get('control_share')!r}")
    acc = num("block_below_accuracy")
    need("block_below_accuracy", acc is not None and 0 <= acc <= 1,
         f"expected an accuracy in [0, 1], got {v.get('block_below_accuracy')!r}")
    mc = num("block_min_controls")
    need("block_min_controls", mc is not None and mc >= 0,
         f"expected a non-negative integer, got {v.get('block_min_controls')!r}")
    agg = v.get("aggregation")
    need("aggregation", agg in ("majority", "dawid-skene"), f"expected majority or dawid-skene, got {agg!r}")
    hw = num("target_halfwidth")
    need("target_halfwidth", hw is not None and 0 < hw <= 0.5,
         f"expected a half-width in (0, 0.5], got {v.get('target_halfwidth')!r}")
    lo, hi = num("min_draws"), num("max_draws")
    need("min_draws", lo is not None and lo >= 0, f"expected a non-negative integer, got {v.get('min_draws')!r}")
    need("max_draws", hi is not None and hi >= 1, f"expected a positive integer, got {v.get('max_draws')!r}")
    if lo is not None and hi is not None and "min_draws" not in errors and "max_draws" not in errors:
        need("max_draws", hi >= lo, f"{hi} is fewer than the fewest draws per level ({lo})")
    ex = num("exhaustive_documents")
    # more than the corpus has is fine: the lifecycle samples min(exhaustive_documents, documents)
    need("exhaustive_documents", ex is not None and ex >= 0,
         f"expected a non-negative number of documents, got {v.get('exhaustive_documents')!r}")
    levels, err = _levels_value(v.get("levels"))
    need("levels", err is None, err or "")
    v["levels"] = levels
    for f in ("open_signup", "gold_public"):
        need(f, isinstance(v.get(f), bool), f"expected true or false, got {v.get(f)!r}")
    err = _recall_protocol_error(corpus, v.get("recall_protocol"))
    need("recall_protocol", err is None, err or "")
    if errors:
        raise SettingsError({f: errors[f] for f in SETTINGS_FIELDS if f in errors})
    return {f: v[f] for f in SETTINGS_FIELDS}


def _recall_protocol_error(corpus: Corpus, value) -> str | None:
    """What is wrong with a recall protocol for ``corpus`` (None: nothing): one of the registry's, and the document
    protocol needs the corpus's entity clusters (its facts are between them)."""
    from unpooled.core.names import RECALL_PROTOCOLS
    from unpooled.service.corpora.models import GoldMention

    if value not in RECALL_PROTOCOLS:
        return f"expected one of {', '.join(RECALL_PROTOCOLS)}, got {value!r}"
    if value == "document" and not GoldMention.objects.filter(document__corpus=corpus).exists():
        return (f"document-level recall counts facts between the corpus's entity clusters, and corpus {corpus.name} "
                "has none (load it from a format with coreference clusters, e.g. docred's vertexSet)")
    return None


def _levels_value(raw) -> tuple[str | None, str | None]:
    """The settings' ``levels`` normalised (comma-separated, no blanks), or None and what is wrong with it."""
    if not isinstance(raw, str):
        return None, f"expected a comma-separated list of {', '.join(LEVELS)}, got {raw!r}"
    got = [x.strip() for x in raw.split(",") if x.strip()]
    bad = [x for x in got if x not in LEVELS]
    if bad:
        return None, f"expected some of {', '.join(LEVELS)} (comma-separated), got {', '.join(bad)}"
    if not got:
        return None, f"at least one of {', '.join(LEVELS)}"
    if len(set(got)) != len(got):
        return None, f"a level is listed twice: {raw!r}"
    return ",".join(got), None


def do_update_settings(corpus: Corpus, values: dict, *, user=None) -> AnnotationSettings:
    """Store new annotation settings (they apply to tasks created from now on)."""
    if user is not None:
        check_organiser(user)
    clean = check_settings(corpus, values)
    st = settings_for(corpus)
    protocol = clean.pop("recall_protocol")
    left_mturk = st.backend == Backend.MTURK and clean["backend"] != Backend.MTURK
    for f, x in clean.items():
        setattr(st, f, x)
    st.save(update_fields=list(clean))
    if left_mturk:   # its live HITs are expired, and what workers submitted reviewed, until every one is settled
        keep_settling(corpus)
    if protocol != st.recall_protocol:
        # the exhaustive relations tasks follow the protocol, and recall is re-scored (annotation.actions)
        do_set_recall_protocol(corpus, protocol)
        st.refresh_from_db()
    return st


def current_settings(corpus: Corpus) -> dict:
    st = settings_for(corpus)
    return {f: getattr(st, f) for f in SETTINGS_FIELDS}


# ---------------------------------------------------------------------------- overview

def overview(corpus: Corpus, *, now=None) -> dict:
    """The console's home for one corpus: alerts, progress per task type, budget, lifecycle counts."""
    from unpooled.service.annotation.status import kind_summary

    now = now or timezone.now()
    kinds = kind_summary(corpus)
    for k in kinds:
        k["share"] = round(100.0 * k["answers_received"] / k["answers_needed"], 1) if k["answers_needed"] else None
    stages = dict(Submission.objects.filter(corpus=corpus).values("status").annotate(n=Count("id"))
                  .values_list("status", "n"))
    return {"alerts": alerts(corpus, now=now), "kinds": kinds, "budget": corpus_budget(corpus),
            "stages": [{"status": s.value, "label": s.label, "n": stages.get(s.value, 0)} for s in Submission.Status],
            "backend": settings_for(corpus).get_backend_display()}
