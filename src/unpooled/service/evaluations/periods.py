"""Evaluation periods: open, close (freezing scores), release, and the period an upload belongs to.

A corpus runs in periods (:class:`~unpooled.service.corpora.models.Period`), at most one open at a time.

* **Uploads.** A submission belongs to the period open when it is stored (:func:`period_for_upload`, called in
  the ingestion's transaction, server-side).  A corpus that has never had a period takes uploads outside periods
  (``period`` empty: a corpus used without periods keeps working); once a corpus has had a period, uploads while
  none is open are refused with a message saying so.
* **Closing** (:func:`do_close_period`) freezes the period's scores: each published submission's newest score per
  level, and its newest entity score (level :data:`~unpooled.service.evaluations.models.ENTITY_SCORES`), is
  recorded as a :class:`~unpooled.service.evaluations.models.ScoreSnapshot`.  A submission still being
  evaluated when the period closes is frozen when it is published (:func:`freeze_pending`, called after every
  re-scoring and publication).  The re-scoring writes no new score for a frozen submission: the relation scores
  (:func:`unpooled.service.evaluations.publish.score_corpus`) and the entity scores
  (:func:`unpooled.service.evaluations.entities.compute`) both write through :func:`frozen_writes`.  Its draws,
  labels and mentions still take part in the joint estimation of the others, but its own published numbers stay
  where they were.
* **Release** (:func:`do_release_period`): the dataset release of :mod:`unpooled.service.annotation.release`
  scoped to the period: the labels of the instances its submissions drew, their answers, and the corpus's
  exhaustive annotation, as they stood at its last frozen score (:func:`release_scope`).
* **Next period**: :func:`do_open_period` with ``follows``, on this corpus or a new one.

Writes follow ``check_*`` (validate and authorise) then ``do_*``.  Only organisers open, close and release
(organisers are site-wide in unpooled: every organiser organises every corpus).
"""

from __future__ import annotations

from contextlib import contextmanager

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from unpooled.service.corpora.models import Corpus, Period
from unpooled.service.corpora.periods import PeriodError, open_period, period_for_upload  # noqa: F401 - re-exported
from unpooled.service.submissions.models import Submission

from .models import ENTITY_SCORES, EntityScore, Score, ScoreSnapshot

MAX_TITLE = 200


def check_organiser(user) -> None:
    from unpooled.service.accounts.actions import is_organiser

    if user is None or not user.is_authenticated:
        raise PeriodError("sign in as an organiser to open, close or release evaluation periods",
                          code="unauthenticated", status=401)
    if not is_organiser(user):
        raise PeriodError("only organisers open, close and release evaluation periods", code="forbidden", status=403)


def get_period(corpus: Corpus, number) -> Period:
    """The corpus's period ``number`` (raises :class:`PeriodError` 404 naming what exists)."""
    try:
        n = int(number)
    except (TypeError, ValueError):
        raise PeriodError(f"period: expected a period number, got {str(number)[:40]!r}") from None
    got = Period.objects.filter(corpus=corpus, number=n).first()
    if got is None:
        have = list(Period.objects.filter(corpus=corpus).values_list("number", flat=True))
        raise PeriodError(f"corpus {corpus.name!r} has no period {n}"
                          + (f" (its periods: {', '.join(map(str, have))})" if have else " (it has no periods)"),
                          code="not_found", status=404)
    return got


# ---------------------------------------------------------------------------- open

def check_open_period(user, corpus: Corpus, *, title: str = "", follows: Period | None = None) -> str:
    check_organiser(user)
    title = (title or "").strip()
    if len(title) > MAX_TITLE:
        raise PeriodError(f"title: at most {MAX_TITLE} characters, got {len(title)}")
    from unpooled.service.submissions.names import hidden_character

    why = hidden_character(title)  # shown on the leaderboard, the console and in releases, as a run's name is
    if why:
        raise PeriodError(f"title: {why}")
    current = open_period(corpus)
    if current is not None:
        raise PeriodError(f"corpus {corpus.name!r} already has an open period ({current.number}, opened "
                          f"{current.opened:%Y-%m-%d %H:%M} UTC): close it first", code="conflict", status=409)
    if follows is not None and follows.is_open:
        raise PeriodError(f"{follows} is still open: close it before starting the next period", code="conflict",
                          status=409)
    return title


def do_open_period(user, corpus: Corpus, *, title: str = "", follows: Period | None = None, now=None) -> Period:
    title = check_open_period(user, corpus, title=title, follows=follows)
    now = now or timezone.now()
    try:
        with transaction.atomic():
            Corpus.objects.select_for_update().filter(pk=corpus.pk).first()  # one opening at a time per corpus
            number = (Period.objects.filter(corpus=corpus).aggregate(m=Max("number"))["m"] or 0) + 1
            return Period.objects.create(corpus=corpus, number=number, title=title, opened=now, opened_by=user,
                                         follows=follows)
    except IntegrityError:  # another organiser opened one at the same moment
        raise PeriodError(f"corpus {corpus.name!r} already has an open period", code="conflict",
                          status=409) from None


# ---------------------------------------------------------------------------- close and freeze

def check_close_period(user, period: Period) -> None:
    check_organiser(user)
    if not period.is_open:
        raise PeriodError(f"{period} closed on {period.closed:%Y-%m-%d %H:%M} UTC already", code="conflict",
                          status=409)


def do_close_period(user, period: Period, *, now=None) -> int:
    """Close the period and freeze its published submissions' scores; returns the number of snapshots made."""
    check_close_period(user, period)
    now = now or timezone.now()
    with transaction.atomic():
        n = Period.objects.filter(pk=period.pk, closed__isnull=True).update(closed=now, closed_by=user)
        if not n:
            raise PeriodError(f"{period} was closed meanwhile", code="conflict", status=409)
        period.closed, period.closed_by = now, user
        return freeze_pending(period.corpus, now=now)


def freeze_pending(corpus: Corpus, *, now=None) -> int:
    """Snapshot the newest score per level, and the newest entity score, of every *published* submission of a
    closed period of ``corpus`` that has none at that level yet.  Idempotent; returns the number of snapshots
    made."""
    now = now or timezone.now()
    subs = dict(Submission.objects.filter(corpus=corpus, period__closed__isnull=False,
                                          status=Submission.Status.PUBLISHED).values_list("pk", "period_id"))
    if not subs:
        return 0
    have = set(ScoreSnapshot.objects.filter(submission_id__in=list(subs)).values_list("submission_id", "level"))
    newest = (Score.objects.filter(submission_id__in=list(subs)).values("submission_id", "level")
              .annotate(m=Max("id")).values_list("submission_id", "level", "m"))
    new = [ScoreSnapshot(period_id=subs[s], submission_id=s, level=lv, score_id=m, frozen=now)
           for s, lv, m in newest if (s, lv) not in have]
    entity = (EntityScore.objects.filter(submission_id__in=list(subs)).values("submission_id")
              .annotate(m=Max("id")).values_list("submission_id", "m"))
    new += [ScoreSnapshot(period_id=subs[s], submission_id=s, level=ENTITY_SCORES, entity_score_id=m, frozen=now)
            for s, m in entity if (s, ENTITY_SCORES) not in have]
    ScoreSnapshot.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)


def frozen_levels(corpus: Corpus) -> set[tuple[int, str]]:
    """(submission id, level) of the corpus's frozen scores (level :data:`.models.ENTITY_SCORES`: its entity
    scores): the re-scoring writes no new score for them."""
    return set(ScoreSnapshot.objects.filter(submission__corpus=corpus).values_list("submission_id", "level"))


@contextmanager
def frozen_writes(corpus: Corpus):
    """The transaction a re-scoring writes its scores of ``corpus`` in: yields :func:`frozen_levels` (whose
    scores it must not write), then freezes what it published for a closed period (:func:`freeze_pending`).

    The frozen levels are read under the open period's row lock (SQLite: an IMMEDIATE transaction), so a period
    closing meanwhile waits, then freezes the scores written here: none is written after its snapshot."""
    with transaction.atomic():
        list(Period.objects.select_for_update().filter(corpus=corpus, closed__isnull=True).values_list("pk"))
        yield frozen_levels(corpus)
        freeze_pending(corpus)  # published submissions of a closed period not frozen yet


def snapshot_of(sub: Submission) -> dict[str, ScoreSnapshot]:
    """The submission's frozen scores by level, its entity scores' under :data:`.models.ENTITY_SCORES` (empty: not
    frozen)."""
    return {s.level: s for s in ScoreSnapshot.objects.filter(submission=sub).select_related("period")}


# ---------------------------------------------------------------------------- release

def check_release_period(user, period: Period) -> None:
    check_organiser(user)
    if period.is_open:
        raise PeriodError(f"{period} is still open: its annotated data is released once it closes",
                          code="conflict", status=409)


def release_scope(period: Period) -> dict:
    """What a period's release holds: the key hashes its public submissions drew (their labels and verification
    answers), the period's time span (gold-control answers given during it), and the moment everything is cut at:
    its last frozen score (its close, or a later publication of a submission evaluated past the close), so the
    release holds what its frozen scores were computed from, not what the corpus gathered since.  A key only
    private submissions drew is not released: which instances a private submission sampled, and how they were
    judged, is that team's (as on the document pages, :func:`unpooled.service.annotation.layers.annotation_layers`)."""
    from .models import Draw

    hashes = (Draw.objects.filter(submission__period=period)  # a subquery, never a long IN list
              .exclude(submission__visibility=Submission.Visibility.PRIVATE).values("key_hash"))
    last = ScoreSnapshot.objects.filter(period=period).aggregate(m=Max("frozen"))["m"]
    return {"period": period.number, "title": period.title, "key_hashes": hashes, "opened": period.opened,
            "closed": period.closed, "cut": max(period.closed, last) if last is not None else period.closed}


def do_release_period(user, period: Period, fileobj, *, now=None):
    """Write the period's release zip to ``fileobj``; returns (the release's name, its counts)."""
    from unpooled.service.annotation import release

    check_release_period(user, period)
    now = now or timezone.now()
    counts = release.write_release_zip(period.corpus, fileobj, now=now, scope=release_scope(period))
    Period.objects.filter(pk=period.pk).update(released=now)
    period.released = now
    return release.release_name(period.corpus, now, period=period.number), counts


# ---------------------------------------------------------------------------- reading

def period_rows(corpus: Corpus) -> list[dict]:
    """The corpus's periods, newest first, with their submission and frozen-score counts."""
    from django.db.models import Count

    rows = []
    for p in (Period.objects.filter(corpus=corpus).select_related("follows__corpus")
              .annotate(n_subs=Count("submissions", distinct=True), n_frozen=Count("snapshots", distinct=True))
              .order_by("-number")):
        rows.append({"period": p, "number": p.number, "title": p.title, "opened": p.opened, "closed": p.closed,
                     "released": p.released, "open": p.is_open, "submissions": p.n_subs, "frozen": p.n_frozen,
                     "follows": p.follows})
    return rows


def period_out(p: Period) -> dict:
    """A period as the API shows it."""
    return {"number": p.number, "title": p.title, "open": p.is_open, "opened": p.opened, "closed": p.closed,
            "released": p.released,
            "follows": ({"corpus": p.follows.corpus.name, "number": p.follows.number} if p.follows_id else None)}


def board_submissions(corpus: Corpus, user, period):
    """The submissions a board of ``corpus`` lists to ``user`` (a queryset): the published ones ``user`` may see,
    with ``period`` those of that period and the human reference.  The relation boards' and the entity board's."""
    from django.db.models import Q

    from unpooled.service.accounts.actions import visible_submissions

    subs = visible_submissions(user, Submission.objects.filter(corpus=corpus, status=Submission.Status.PUBLISHED))
    return subs.filter(Q(period=period) | Q(is_reference=True)) if period is not None else subs


def period_info(period) -> dict | None:
    """What a board says of the period it lists (None: every period)."""
    if period is None:
        return None
    return {"number": period.number, "title": period.title, "open": period.is_open, "opened": period.opened,
            "closed": period.closed}
