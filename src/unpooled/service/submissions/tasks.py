"""Background tasks for submissions (django-tasks; the db worker runs them)."""

from __future__ import annotations

import logging
from pathlib import Path

from django.db import DatabaseError, InterfaceError, OperationalError
from django_tasks import task

from .actions import do_ingest_submission
from .storage import FULL_MESSAGE, storage_full

log = logging.getLogger(__name__)


def _refused(file_name: str, message: str) -> dict:
    return {"ok": False, "error": message,
            "report": {"path": file_name, "errors": [], "warnings": [], "n_errors": 0, "n_warnings": 0}}


#: an upload is validated before the queued lifecycles and re-scorings run (the team waits on the upload page for its
#: outcome; measured by ``bench shared-task``: with one worker and 20 uploads at once the last one waited six minutes
#: behind the first submissions' evaluations)
INGEST_PRIORITY = 10


@task(priority=INGEST_PRIORITY)
def ingest_upload(path: str, corpus: str, team: str, run: str | None, fmt: str | None, file_name: str,
                  visibility: str = "public", user_id: int | None = None, description: str = "",
                  start: bool = True, attempt: int | None = None) -> dict:
    """Validate and store an uploaded file, then start its evaluation; returns the ingest result (report included).

    The team's quota is checked again here, inside the storing transaction. The uploaded
    copy is removed once the outcome is recorded, accepted or not; a task re-run after a
    crash finds the same file already stored (by its SHA-256), or the copy gone.  A database error keeps the copy
    for the run the worker then makes (:mod:`unpooled.service.workers`); a full disk is a rejection that says so.
    ``start=False`` stores the submission without starting its evaluation (an organiser's bulk load).
    ``attempt``: the :class:`~.models.UploadAttempt` to record the outcome on (rate limits). The returned report
    keeps at most :data:`~.uploads.STORED_DIAGNOSTICS` diagnostics (exact counts); outcomes older than
    ``settings.UPLOAD_RESULT_HOURS`` are deleted here, by the next upload's task (:func:`.uploads.prune`).
    """
    from django.contrib.auth import get_user_model

    from unpooled.service.corpora.actions import ActionError

    from . import uploads
    from .quota import QuotaError

    out = None
    keep = False
    try:
        if not Path(path).exists():
            out = _refused(file_name, "the uploaded file is gone (the upload was already processed); upload it again")
            return out
        user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
        try:
            res = do_ingest_submission(path, corpus, team, run or None, fmt or None, file_name=file_name,
                                       enforce_quota=True, visibility=visibility, submitted_by=user,
                                       description=description, start=start)
            out = res.to_dict()
            out["report"] = uploads.trim_report({**out["report"], "path": file_name})
        except (QuotaError, ActionError) as exc:
            out = _refused(file_name, str(exc))
        out = uploads.json_safe(out)
        return out
    except (OSError, DatabaseError) as exc:
        if storage_full(exc):  # the transaction was rolled back: nothing stored; the submitter is told why
            out = uploads.json_safe(_refused(file_name, f"{FULL_MESSAGE} (the server's disk filled while storing "
                                                        f"{file_name})"))
            return out
        # the database failed (not the file): the worker runs this task again, which needs the file
        keep = isinstance(exc, (OperationalError, InterfaceError))
        raise
    finally:
        if not keep:
            Path(path).unlink(missing_ok=True)
            try:
                uploads.finish_attempt(attempt, out)  # None: the validation crashed
                uploads.prune()
            except Exception:  # noqa: BLE001 - book-keeping never turns a stored submission into a failed task
                log.exception("recording the outcome of upload attempt %s failed", attempt)
