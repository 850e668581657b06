"""The file cache of ``UNPOOLED_CACHE`` (``$UNPOOLED_DATA_DIR/cache``): an entry that cannot be read is a miss.

Django's :class:`~django.core.cache.backends.filebased.FileBasedCache` raises when an entry's file is
cut short, emptied or overwritten (a full disk, a crash of the machine, a copy between machines):
``zlib.error``, ``UnpicklingError``, ``EOFError``... Every page reading that entry (leaderboards, submission
pages, task bodies, sessions) then answered 500 until its key changed or it expired, up to a day later.
Here such an entry is deleted and reads as absent, so its caller builds it again and stores it afresh.

The folder is made 0700 and each entry 0600 (Django's own ``mkstemp``), so only the service's user can
write what is unpickled here.

Each process also keeps the text and bytes it read (whole pages, rendered page bodies: immutable, so no caller can
change what another gets), up to :data:`MEMO_BYTES`, beside the identity of the file they came from (inode,
modification time in ns, size).  A read whose file still has that identity returns them after one ``stat``,
without opening, unpickling and decompressing the file: a cached leaderboard of 300 KB cost 0.9 ms of CPU that way
(issue 22, item 9).  Anything that changes the entry changes the file's identity (``set`` writes a new file and
renames it, ``touch`` rewrites it, ``delete``/``clear``/culling remove it), and an expired entry is read the
ordinary way (and deleted), so the memo never answers what the file would not.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
import zlib
from collections import OrderedDict

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
        return self._expiry(f)[0]

    def _expiry(self, f) -> tuple[bool, float | None]:
        """(expired or unreadable, the expiry time): an expired or corrupt entry is deleted and ``f`` closed."""
        try:
            exp = pickle.load(f)
        except EOFError:
            exp = 0  # an empty file is expired (as in Django)
        except Exception as exc:  # noqa: BLE001 - any unreadable header is a corrupt entry
            f.close()
            self._discard(f.name, exc)
            return True, None
        if exp is not None and not isinstance(exp, (int, float)):
            f.close()
            self._discard(f.name, TypeError(f"expiry {type(exp).__name__}"))
            return True, None
        if exp is not None and exp < time.time():
            f.close()
            self._delete(f.name)
            return True, exp
        return False, exp

    def get(self, key, default=None, version=None):
        fname = self._key_to_file(key, version)
        try:
            st = os.stat(fname)
        except FileNotFoundError:
            return default
        kept = _memo_get(fname, (st.st_ino, st.st_mtime_ns, st.st_size))
        if kept is not None:
            return kept
        try:
            with open(fname, "rb") as f:
                expired, expiry = self._expiry(f)
                if not expired:
                    st = os.fstat(f.fileno())
                    try:
                        value = pickle.loads(zlib.decompress(f.read()))
                    except Exception as exc:  # noqa: BLE001 - cut short, overwritten, an unknown class: a miss
                        self._discard(fname, exc)
                    else:
                        if isinstance(value, (bytes, str)):
                            _memo_put(fname, (st.st_ino, st.st_mtime_ns, st.st_size), expiry, value)
                        return value
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


#: the text and bytes each process keeps beside their files (least recently read dropped first)
MEMO_BYTES = 32 * 2**20
_memo: OrderedDict[str, tuple[tuple, float | None, bytes | str, int]] = OrderedDict()  # ident, expiry, value, size
_memo_size = 0
_memo_lock = threading.Lock()  # Django makes a cache object per thread: the memo is the process's


def _memo_get(fname: str, ident: tuple):
    """The value kept for ``fname`` if its file still has identity ``ident`` and has not expired, else ``None``."""
    with _memo_lock:
        got = _memo.get(fname)
        if got is None or got[0] != ident or (got[1] is not None and got[1] < time.time()):
            return None
        _memo.move_to_end(fname)
        return got[2]


def _memo_put(fname: str, ident: tuple, expiry, value: bytes | str) -> None:
    global _memo_size
    size = len(value) * (1 if isinstance(value, bytes) else 4)  # a str's bound: 4 bytes a character
    if size > MEMO_BYTES // 8:
        return
    with _memo_lock:
        old = _memo.pop(fname, None)
        _memo[fname] = (ident, expiry, value, size)
        _memo_size += size - (old[3] if old is not None else 0)
        while _memo_size > MEMO_BYTES:
            _memo_size -= _memo.popitem(last=False)[1][3]
