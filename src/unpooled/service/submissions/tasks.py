"""Background tasks for submissions (django-tasks; the db worker runs them)."""

from __future__ import annotations

from pathlib import Path

from django.db import DatabaseError, InterfaceError, OperationalError
from django_tasks import task

from .actions import do_ingest_submission
from .storage import FULL_MESSAGE, storage_full


@task()
def ingest_upload(path: str, corpus: str, team: str, run: str | None, fmt: str | None, file_name: str,
                  visibility: str = "public", user_id: int | None = None, description: str = "",
                  start: bool = True) -> dict:
    """Validate and store an uploaded file, then start its evaluation; returns the ingest result (report included).

    The team's quota is checked again here, inside the storing transaction. The uploaded
    copy is removed once the outcome is recorded, accepted or not; a task re-run after a
    crash finds the same file already stored (by its SHA-256), or the copy gone.  A database error keeps the copy
    for the run the worker then makes (unpooled.service.workers); a full disk is a rejection that says so.  ``start=False`` stores
    the submission without starting its evaluation (an organiser's bulk load).
    """
    from django.contrib.auth import get_user_model

    from .quota import QuotaError
    from unpooled.service.corpora.actions import ActionError

    if not Path(path).exists():
        return {"ok": False, "error": "the uploaded file is gone (the upload was already processed); upload it again",
                "report": {"path": file_name, "errors": [], "warnings": [], "n_errors": 0, "n_warnings": 0}}
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    keep = False
    try:
        res = do_ingest_submission(path, corpus, team, run or None, fmt or None, file_name=file_name,
                                   enforce_quota=True, visibility=visibility, submitted_by=user,
                                   description=description, start=start)
        out = res.to_dict()
        out["report"]["path"] = file_name
        return out
    except (QuotaError, ActionError) as exc:
        return {"ok": False, "error": str(exc),
                "report": {"path": file_name, "errors": [], "warnings": [], "n_errors": 0, "n_warnings": 0}}
    except (OSError, DatabaseError) as exc:
        if storage_full(exc):  # the transaction was rolled back: nothing stored; the submitter is told why
            return {"ok": False, "error": f"{FULL_MESSAGE} (the server's disk filled while storing {file_name})",
                    "report": {"path": file_name, "errors": [], "warnings": [], "n_errors": 0, "n_warnings": 0}}
        # the database failed (not the file): the worker runs this task again, which needs the file
        keep = isinstance(exc, (OperationalError, InterfaceError))
        raise
    finally:
        if not keep:
            Path(path).unlink(missing_ok=True)
