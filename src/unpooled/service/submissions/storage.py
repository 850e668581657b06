"""Storing an uploaded file until a worker validates it, and telling a full disk from other errors.

An upload is written to ``settings.UPLOAD_DIR/<uuid>.upload`` by the web process and removed by the ingestion
task once its outcome is recorded.  A write that fails (a full disk, a quota) removes what it wrote and raises
:class:`StorageFull` when space ran out, so that nothing is half-stored and the submitter is told why.  What a
killed web process leaves (a request body it was receiving, in ``settings.FILE_UPLOAD_TEMP_DIR``, or a copy it
had not handed to a task) is deleted later by the task workers (:func:`unpooled.service.workers.sweep_uploads`).
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path
from typing import Iterable

from django.conf import settings

#: what the submitter is told when the server has no room (API code ``storage_full``, HTTP 507)
FULL_MESSAGE = "the server has no disk space left to store the upload; nothing was stored; try again later"


class StorageFull(Exception):
    """The server ran out of disk space (or quota) while storing an upload; nothing of it was kept."""

    def __init__(self, what: str = FULL_MESSAGE) -> None:
        super().__init__(what)


def storage_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from) says the disk or a quota is full: ``OSError`` ENOSPC/EDQUOT,
    SQLite's "database or disk is full", PostgreSQL's disk_full (53100)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, StorageFull):
            return True
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(exc).lower()
        if "database or disk is full" in text or "no space left on device" in text or \
                getattr(getattr(exc, "__cause__", None), "sqlstate", None) == "53100" or \
                getattr(exc, "sqlstate", None) == "53100":
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def store_upload(chunks: Iterable[bytes]) -> Path:
    """Write ``chunks`` to a new file under ``settings.UPLOAD_DIR``, readable by the service's user only (folder
    0700, file 0600, created so: no moment at the umask's mode); its path.  On any error the file is removed;
    a full disk raises :class:`StorageFull`."""
    folder = Path(settings.UPLOAD_DIR)
    dest = folder / f"{uuid.uuid4().hex}.upload"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        return dest
    except BaseException as exc:
        dest.unlink(missing_ok=True)
        if storage_full(exc):
            raise StorageFull() from exc
        raise


def discard_received(request) -> None:
    """Delete what Django had received of a request body whose receiving failed (its temporary file would
    otherwise stay until the request object is garbage-collected)."""
    for handler in getattr(request, "_upload_handlers", None) or []:
        f = getattr(handler, "file", None)
        if f is not None:
            try:
                f.close()  # a TemporaryUploadedFile deletes itself when closed
            except OSError:
                pass
