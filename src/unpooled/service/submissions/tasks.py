"""Background tasks for submissions (django-tasks; the db worker runs them)."""

from __future__ import annotations

from pathlib import Path

from django_tasks import task

from .actions import do_ingest_submission


@task()
def ingest_upload(path: str, corpus: str, team: str, run: str | None, fmt: str | None, file_name: str) -> dict:
    """Validate and store an uploaded file; returns the ingest result (report included).

    The uploaded copy is removed once the outcome is recorded, accepted or not.
    """
    try:
        res = do_ingest_submission(path, corpus, team, run or None, fmt or None, file_name=file_name)
        out = res.to_dict()
        out["report"]["path"] = file_name
        return out
    finally:
        Path(path).unlink(missing_ok=True)
