"""Locks across processes, for work that must not run twice at once: one submission's lifecycle, one corpus's
simulated crowd, Dawid–Skene labels and re-scoring.

:func:`exclusive` waits until no other process holds ``(name, key)``, then holds it while the block runs.  On
PostgreSQL it is a session advisory lock (``pg_advisory_lock``), so workers on several machines exclude each other,
and a worker that dies (or loses its connection) releases it with its session.  On SQLite -- one machine by
construction -- it is an ``flock`` on a file under the data directory, released by the kernel when the process
dies (per database file; an in-memory database is one process's: nothing to lock).  Inside a transaction,
PostgreSQL's lock is held until the transaction ends (``pg_advisory_xact_lock``).  A process may take a lock it
already holds (the count is kept per process): nested calls never wait for themselves.

Short critical sections that write rows use a row lock inside their transaction instead
(``select_for_update`` on the corpus); these locks are for work that spans many transactions.  Order, to never
deadlock: a submission's lifecycle, then one of the corpus's (crowd, Dawid–Skene labels, re-scoring), none of
which waits for another; a row lock is taken last and held without waiting for one of these.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import zlib
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection

_held: dict[tuple[str, int], int] = {}
_guard = threading.Lock()


def _namespace(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


@contextlib.contextmanager
def exclusive(name: str, key: int):
    """Hold the lock ``(name, key)`` across processes while the block runs (waiting for it first)."""
    ident = (name, int(key))
    with _guard:
        nested = _held.get(ident, 0) > 0
        _held[ident] = _held.get(ident, 0) + 1
    try:
        if nested:
            yield
        elif connection.vendor == "postgresql":
            with _advisory(_namespace(name), int(key)):
                yield
        elif connection.is_in_memory_db():  # one process can see it: the count above is the lock
            yield
        else:  # per database file: two databases under one data directory (tests) do not exclude each other
            db = zlib.crc32(str(connection.settings_dict["NAME"]).encode())
            with _file_lock(Path(settings.DATA_DIR) / "locks" / f"{db:08x}-{name}-{int(key)}.lock"):
                yield
    finally:
        with _guard:
            _held[ident] -= 1
            if not _held[ident]:
                del _held[ident]


@contextlib.contextmanager
def _advisory(namespace: int, key: int):
    if connection.in_atomic_block:
        # held until the transaction ends, committed or rolled back (an unlock could not run in a failed one)
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [namespace, key])
        yield
        return
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s, %s)", [namespace, key])
    try:
        yield
    finally:
        try:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace, key])
        except DatabaseError:  # the connection died: the session's locks died with it
            pass


@contextlib.contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


__all__ = ["exclusive"]
