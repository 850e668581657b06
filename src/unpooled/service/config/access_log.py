"""Logs without the credentials some URLs carry: a lease's token in ``/annotate/task/<token>/`` (an MTurk worker's
only credential, held by nobody else), and in the MTurk entry's query the link's handle or signature and Amazon's
worker, assignment and HIT ids (a worker id identifies a person).  :class:`RedactingLogger` is gunicorn's access log
(``unpooled serve``), :class:`RedactFilter` the service's own (Django logs every 4xx with its path)."""

from __future__ import annotations

import logging
import re

from gunicorn.glogging import Logger

_PATH = re.compile(r"(/annotate/task/)[^/?#\s\"']+")
_QUERY = re.compile(r"((?:^|[?&])(?:sig|hit|workerId|assignmentId|hitId)=)[^&#\s\"']*", re.IGNORECASE)
HIDDEN = "*"


def redact(text: str) -> str:
    """``text`` with every lease token and MTurk entry credential replaced by :data:`HIDDEN`."""
    return _QUERY.sub(r"\g<1>" + HIDDEN, _PATH.sub(r"\g<1>" + HIDDEN, text))


class RedactFilter(logging.Filter):
    """Redact a record's message (:func:`redact`); the record is always kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = redact(msg)
        if clean != msg:
            record.msg, record.args = clean, ()
        return True


class RedactingLogger(Logger):
    """gunicorn's logger, its access log's request line, path, query and referer redacted (:func:`redact`)."""

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for key, value in atoms.items():
            if isinstance(value, str):
                atoms[key] = redact(value)
        return atoms
