"""The file cache of ``UNPOOLED_CACHE`` (``$UNPOOLED_DATA_DIR/cache``): an entry that cannot be read is a miss.

Django's :class:`~django.core.cache.backends.filebased.FileBasedCache` raises when an entry's file is
cut short, emptied or overwritten (a full disk, a crash of the machine, a copy between machines):
``zlib.error``, ``UnpicklingError``, ``EOFError``... Every page reading that entry (leaderboards, submission
pages, task bodies, sessions) then answered 500 until its key changed or it expired, up to a day later.
Here such an entry is deleted and reads as absent, so its caller builds it again and stores it afresh.

The folder is made 0700 and each entry 0600 (Django's own ``mkstemp``), so only the service's user can
write what is unpickled here.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
import zlib

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.filebased import FileBasedCache
from django.core.files import locks

log = logging.getLogger(__name__)


class SafeFileBasedCache(FileBasedCache):
    """:class:`FileBasedCache` where a corrupt entry is a miss (and is removed), never an exception."""

    def _discard(self, fname: str, exc: BaseException) -> None:
        log.warning("cache entry %s is unreadable (%s: %s): removed, it will be rebuilt", fname,
                    type(exc).__name__, exc)
        try:
            os.remove(fname)
        except OSError:
            pass

    def _is_expired(self, f) -> bool:
        """Expired, or its expiry header unreadable (the entry is then deleted, as an expired one is)."""
        try:
            exp = pickle.load(f)
        except EOFError:
            exp = 0  # an empty file is expired (as in Django)
        except Exception as exc:  # noqa: BLE001 - any unreadable header is a corrupt entry
            f.close()
            self._discard(f.name, exc)
            return True
        if exp is not None and not isinstance(exp, (int, float)):
            f.close()
            self._discard(f.name, TypeError(f"expiry {type(exp).__name__}"))
            return True
        if exp is not None and exp < time.time():
            f.close()
            self._delete(f.name)
            return True
        return False

    def get(self, key, default=None, version=None):
        fname = self._key_to_file(key, version)
        try:
            with open(fname, "rb") as f:
                if not self._is_expired(f):
                    try:
                        return pickle.loads(zlib.decompress(f.read()))
                    except Exception as exc:  # noqa: BLE001 - cut short, overwritten, an unknown class: a miss
                        self._discard(fname, exc)
        except FileNotFoundError:
            pass
        return default

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        fname = self._key_to_file(key, version)
        try:
            with open(fname, "r+b") as f:
                try:
                    locks.lock(f, locks.LOCK_EX)
                    if self._is_expired(f):
                        return False
                    try:
                        previous_value = pickle.loads(zlib.decompress(f.read()))
                    except Exception as exc:  # noqa: BLE001
                        self._discard(fname, exc)
                        return False
                    f.seek(0)
                    self._write_content(f, timeout, previous_value)
                    f.truncate()
                    return True
                finally:
                    if not f.closed:
                        locks.unlock(f)
        except FileNotFoundError:
            return False
