"""Uploads on their way to validation: their files, who may see them, and how much work one caller can cause.

Both the web form and the API go through here:

- :func:`check_upload_rate` refuses an upload (HTTP 429, code ``rate_limited``) when the team, the user
  or the client address has had :data:`settings.UPLOAD_REJECTS_PER_DAY` uploads rejected in the last 24
  hours (``UPLOAD_REJECTS_PER_ADDRESS`` for an address), or the team has
  :data:`settings.UPLOADS_PENDING` uploads still waiting. A rejected upload stores nothing, so it never
  counted against the quota; without this, one token could keep the task worker busy for ever.  An address may
  also have at most ``UPLOADS_PER_ADDRESS`` uploads accepted or waiting in 24 hours, whatever the team.
- :func:`save_upload` writes the bytes to a new file readable by the service's user only (0600, in a
  0700 folder, created so).
- :func:`start_upload` records the attempt (:class:`~.models.UploadAttempt`) and queues the validation.
- :func:`may_see_upload` is the one owner check of an upload's status (API and web page alike).
- :func:`prune` deletes the outcomes of uploads older than :data:`settings.UPLOAD_RESULT_HOURS`
  (task results, with the report of a rejected file) and attempts older than that and a day.
"""

from __future__ import annotations

import ipaddress
import logging
from datetime import timedelta
from pathlib import Path
from typing import Iterable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .models import Team, UploadAttempt
from .quota import QuotaError

log = logging.getLogger(__name__)

#: diagnostics kept in the stored outcome of a rejected upload (the counts stay exact)
STORED_DIAGNOSTICS = 1000
#: diagnostics a rejected upload keeps in the team's upload history (:class:`~.models.UploadAttempt`)
HISTORY_DIAGNOSTICS = 50
#: how long rejected and failed uploads stay in the history (accepted ones are submissions)
HISTORY_DAYS = 90


# ---------------------------------------------------------------------------- files

def save_upload(chunks: Iterable[bytes]) -> Path:
    """Write the uploaded bytes to a new file under ``settings.UPLOAD_DIR`` (folder 0700, file 0600, created
    so); a full disk raises :class:`~.storage.StorageFull` with nothing kept (:func:`.storage.store_upload`)."""
    from .storage import store_upload

    return store_upload(chunks)


# ---------------------------------------------------------------------------- how much work

def client_address(request) -> str | None:
    """The request's client address (``REMOTE_ADDR``), or ``None`` when it is not an IP address."""
    raw = (request.META.get("REMOTE_ADDR") or "").strip()
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        return None


def check_upload_rate(team_name: str, *, user=None, address: str | None = None, now=None) -> None:
    """Raise :class:`QuotaError` (429 ``rate_limited``) when this upload would exceed the limits on rejected and
    waiting uploads (see the module's docstring). Organisers are not checked (the caller skips them)."""
    now = now or timezone.now()
    day = UploadAttempt.objects.filter(created__gte=now - timedelta(days=1))
    bad = day.filter(state__in=(UploadAttempt.State.REJECTED, UploadAttempt.State.FAILED))
    limit = settings.UPLOAD_REJECTS_PER_DAY
    retry = ("check the file first (`unpooled validate FILE --corpus CORPUS_FILE`), or upload again after the "
             "oldest of them is 24 hours old")
    if limit and bad.filter(team_name=team_name).count() >= limit:
        raise QuotaError(f"rate limit: team {team_name!r} has had {limit} uploads rejected in the last 24 hours, "
                         f"the most it may; {retry}", code="rate_limited")
    if limit and user is not None and getattr(user, "pk", None) and bad.filter(user=user).count() >= limit:
        raise QuotaError(f"rate limit: user {user.get_username()!r} has had {limit} uploads rejected in the last "
                         f"24 hours, the most they may; {retry}", code="rate_limited")
    per_address = settings.UPLOAD_REJECTS_PER_ADDRESS
    if per_address and address and bad.filter(address=address).count() >= per_address:
        raise QuotaError(f"rate limit: {per_address} uploads from your address were rejected in the last 24 "
                         f"hours, the most it may; {retry}", code="rate_limited")
    per_address = getattr(settings, "UPLOADS_PER_ADDRESS", 0)
    if per_address and address and day.filter(address=address, state__in=(
            UploadAttempt.State.QUEUED, UploadAttempt.State.ACCEPTED)).count() >= per_address:
        raise QuotaError(f"rate limit: {per_address} uploads from your address were accepted or are waiting in the "
                         "last 24 hours, the most one address may (whatever the team); upload again once the oldest "
                         "of them is 24 hours old, or ask an organiser", code="rate_limited")
    pending = settings.UPLOADS_PENDING
    waiting = day.filter(team_name=team_name, state=UploadAttempt.State.QUEUED).count()
    if pending and waiting >= pending:
        raise QuotaError(f"rate limit: team {team_name!r} has {waiting} uploads waiting for validation, the most "
                         f"it may; upload again once one of them is done", code="rate_limited")


def start_upload(path: Path, *, corpus: str, team: str, run: str, fmt: str, file_name: str, visibility: str,
                 description: str, user=None, address: str | None = None, limited: bool = True):
    """Record the attempt and queue the validation of the saved file ``path``; returns the task result.

    ``limited``: check :func:`check_upload_rate` first (with the team's row locked, so that concurrent
    uploads of one team are counted one after the other); organisers' uploads are not limited.
    On any refusal or error the saved file is removed and nothing is recorded.
    """
    from .tasks import ingest_upload

    user_id = getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None
    file_name = file_name.replace("\x00", "\ufffd")  # shown, never looked up: a database text column refuses NUL
    try:
        with transaction.atomic():
            if limited:
                Team.objects.select_for_update().filter(name=team).first()
                check_upload_rate(team, user=user if user_id else None, address=address)
            attempt = UploadAttempt.objects.create(team_name=team, user_id=user_id, address=address,
                                                   corpus_name=str(corpus)[:100], file_name=file_name[:500])
        try:
            result = ingest_upload.enqueue(str(path), corpus, team, run, fmt, file_name, visibility, user_id,
                                           description, attempt=attempt.pk)
        except BaseException:
            UploadAttempt.objects.filter(pk=attempt.pk).delete()
            raise
    except BaseException:
        Path(path).unlink(missing_ok=True)
        raise
    UploadAttempt.objects.filter(pk=attempt.pk).update(task_id=str(result.id))
    return result


def history_outcome(outcome: dict | None) -> dict:
    """What the upload history keeps of an outcome: the message, the counts and the first
    :data:`HISTORY_DIAGNOSTICS` diagnostics (errors first), or the submission an accepted upload became."""
    if outcome is None:
        return {"error": "the validation crashed; the organisers have the log"}
    if outcome.get("ok"):
        sub = outcome.get("submission")
        return {"submission": sub if isinstance(sub, int) else None}
    rep = outcome.get("report") or {}
    return json_safe({"error": outcome.get("error") or "", "n_errors": rep.get("n_errors", 0),
                      "n_warnings": rep.get("n_warnings", 0),
                      "diagnostics": trim_report(rep, HISTORY_DIAGNOSTICS).get("errors", [])[:HISTORY_DIAGNOSTICS]})


def finish_attempt(attempt: int | None, outcome: dict | None) -> None:
    """Record what became of an upload (called by the validation task; ``None``: it crashed), and keep a
    rejected one's diagnostics for the team's upload history."""
    if not attempt:
        return
    if outcome is None:
        state = UploadAttempt.State.FAILED
    else:
        state = UploadAttempt.State.ACCEPTED if outcome.get("ok") else UploadAttempt.State.REJECTED
    UploadAttempt.objects.filter(pk=attempt).update(state=state, finished=timezone.now(),
                                                    outcome=history_outcome(outcome))


def upload_history(team, user, *, limit: int = 50):
    """The newest uploads of ``team`` (or, without a team, of ``user``), newest first."""
    if team is not None:
        qs = UploadAttempt.objects.filter(team_name=team.name)
    elif getattr(user, "is_authenticated", False):
        qs = UploadAttempt.objects.filter(user=user)
    else:
        return UploadAttempt.objects.none()
    return qs.order_by("-created", "-id")[:limit]


def json_safe(v):
    """``v`` with every NUL character (U+0000) shown as U+FFFD: a PostgreSQL JSON or text column refuses NUL, and a
    rejected file's diagnostics quote it (the outcome could not be stored, so the upload showed as failed)."""
    if isinstance(v, str):
        return v.replace("\x00", "\ufffd")
    if isinstance(v, dict):
        return {json_safe(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


def trim_report(report: dict, keep: int = STORED_DIAGNOSTICS) -> dict:
    """A report's dict with at most ``keep`` diagnostics (errors first); counts and ``by_code`` stay exact,
    ``omitted`` tells per code how many were left out."""
    errors, warnings = report.get("errors") or [], report.get("warnings") or []
    if len(errors) + len(warnings) <= keep:
        return report
    errors = errors[:keep]
    warnings = warnings[:keep - len(errors)]
    kept: dict[str, int] = {}
    for d in errors + warnings:
        kept[d.get("code", "")] = kept.get(d.get("code", ""), 0) + 1
    omitted = {c: n - kept.get(c, 0) for c, n in (report.get("by_code") or {}).items() if n > kept.get(c, 0)}
    return {**report, "errors": errors, "warnings": warnings, "omitted": omitted}


# ---------------------------------------------------------------------------- who sees it

def upload_owner(result) -> tuple[str, int | None]:
    """The team an upload is for and the id of the user who made it (from the task's arguments)."""
    args = list(result.args) + [None] * 9
    return str(args[2] or ""), args[7]


def may_see_upload(result, *, user, team, organiser: bool) -> bool:
    """The uploading team (``team``: the caller's team, or ``None``), the user who uploaded, and organisers."""
    team_name, user_id = upload_owner(result)
    if organiser:
        return True
    if team is not None and team_name and team.name == team_name:
        return True
    return bool(getattr(user, "is_authenticated", False) and user_id is not None and user_id == user.pk)


def visible_upload(upload_id: str, *, user, team, organiser: bool):
    """The validation task result of upload ``upload_id`` when the caller :func:`may_see_upload` it, else ``None``
    (no such upload, a malformed id, or someone else's: the callers answer 404 alike)."""
    from django.core.exceptions import ValidationError
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch

    from .tasks import ingest_upload

    try:
        result = ingest_upload.get_result(upload_id)
    except (TaskResultDoesNotExist, TaskResultMismatch, ValueError, ValidationError, NotImplementedError):
        return None
    return result if may_see_upload(result, user=user, team=team, organiser=organiser) else None


# ---------------------------------------------------------------------------- retention

def prune(now=None) -> dict[str, int]:
    """Delete finished upload outcomes older than ``settings.UPLOAD_RESULT_HOURS`` (their task results, with the
    report of a rejected file) and attempts older than that and a day (the rate window). Returns the counts."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    from .tasks import ingest_upload

    now = now or timezone.now()
    cutoff = now - timedelta(hours=settings.UPLOAD_RESULT_HOURS)
    n_results, _ = DBTaskResult.objects.filter(
        task_path=ingest_upload.module_path, status__in=(TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED),
        finished_at__lt=cutoff).delete()
    # accepted and waiting attempts go after the rate window; rejected and failed ones are the team's upload
    # history (their diagnostics) for HISTORY_DAYS: their number is bounded by the rate limit on rejections
    old = UploadAttempt.objects.filter(created__lt=min(cutoff, now - timedelta(days=1)))
    n_attempts, _ = (old.exclude(state__in=(UploadAttempt.State.REJECTED, UploadAttempt.State.FAILED))
                     | old.filter(created__lt=now - timedelta(days=HISTORY_DAYS))).delete()
    return {"results": n_results, "attempts": n_attempts}
