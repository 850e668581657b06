"""``?wait=`` on the upload endpoints without using up the web server.

``unpooled serve`` runs sync web workers: a request that sleeps holds a whole process, and four waiting
requests once made ``GET /`` take 28 s. So a request waits for an upload's validation at most
``settings.UPLOAD_WAIT_SECONDS`` (whatever it asked; the answer then tells it to poll again, with
``Retry-After``), and only while it holds one of ``settings.UPLOAD_WAIT_SLOTS`` wait slots of the machine
(an exclusive ``flock`` on a file in ``settings.UPLOAD_WAIT_DIR``, by default ``$UNPOOLED_DATA_DIR/run``, shared
by every process of the machine and released by the kernel if a process dies). A request that finds every slot
taken answers at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings

#: seconds a client is told to wait before polling an unfinished upload again
POLL_SECONDS = 2


@contextlib.contextmanager
def wait_slot() -> Iterator[bool]:
    """Hold a free wait slot of this machine while in the block: yields ``True``, or ``False`` when all are taken."""
    folder = Path(settings.UPLOAD_WAIT_DIR)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for i in range(max(0, settings.UPLOAD_WAIT_SLOTS)):
        fd = os.open(folder / f"wait-{i}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield True
        finally:
            os.close(fd)  # releases the lock
        return
    yield False


def wait_until_finished(result, seconds: float, *, clock: Callable[[], float] | None = None,
                        sleep: Callable[[float], None] | None = None):
    """Refresh ``result`` until its task has finished, for at most ``min(seconds, UPLOAD_WAIT_SECONDS)``
    and only with a wait slot; returns the (refreshed) result."""
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    seconds = min(float(seconds), settings.UPLOAD_WAIT_SECONDS)
    if seconds <= 0 or result.is_finished:
        return result
    with wait_slot() as got:
        if not got:
            return result
        end = clock() + seconds
        while not result.is_finished and clock() < end:
            sleep(min(0.25, max(0.0, end - clock())))
            result.refresh()
    return result
