"""Whole pages for readers who are not signed in: one rendering serves them all until what the page shows changes.

A page that is the same for every anonymous reader (no session, no message waiting, no demo banner: see
:func:`anonymous_reader`) is kept whole in the cache shared by the server's processes, under a key that changes
whenever its content may (the caller's: a leaderboard's fingerprint), so a view of it costs a cache read and the
queries that make the key: the rendering, the template and the page's other queries are skipped (issue 22, item 9:
2 cores serving 1,000 views a second).  Everyone else gets the page rendered as before (its fragments cached).
"""

from __future__ import annotations

import gzip
from typing import Callable

from django.core.cache import cache
from django.http import HttpResponse
from django.utils.cache import patch_vary_headers

from .demo_progress import current_progress

#: a page kept whole is rendered again at least this often (its key changes sooner when its content does)
PAGE_SECONDS = 600


def anonymous_reader(request) -> bool:
    """Whether ``request`` sees the page every reader not signed in sees: a GET without a user, without a message
    waiting (the messages framework's cookie), while no demo is loading (its banner changes by the second)."""
    return (request.method == "GET" and not request.user.is_authenticated and "messages" not in request.COOKIES
            and current_progress() is None)


def whole_page(request, key: str, render: Callable[[], HttpResponse]) -> HttpResponse:
    """The page under ``key`` from the cache, else ``render()``'s, kept when it is a complete 200 HTML page that
    ``render`` did not mark ``Cache-Control: no-cache`` (a part of it still being computed).

    A page is kept twice: as it is, and gzip-compressed (once, when it is rendered) for the readers whose browser
    accepts that (all of them: a 300 KB leaderboard travels as about 30 KB, and the server sends a tenth of the
    bytes).  A kept page holds no secret of its reader (no session, no CSRF token: :func:`anonymous_reader`), so
    compressing it beside the reader's own input gives nothing away (BREACH)."""
    gzipped = accepts_gzip(request.headers.get("Accept-Encoding", ""))
    body = cache.get(key + ":gz" if gzipped else key)
    if body is not None:
        return _response(body, gzipped)
    resp = render()
    if (resp.status_code == 200 and not resp.streaming and resp.get("Content-Type", "").startswith("text/html")
            and "no-cache" not in resp.get("Cache-Control", "")):
        packed = gzip.compress(resp.content, compresslevel=6, mtime=0)
        cache.set_many({key: resp.content, key + ":gz": packed}, PAGE_SECONDS)
        if gzipped:
            return _response(packed, True)
    patch_vary_headers(resp, ("Accept-Encoding",))
    return resp


def accepts_gzip(header: str) -> bool:
    """Whether an ``Accept-Encoding`` value admits gzip: named, else ``*``, with a weight other than 0."""
    weights = {}
    for part in header.lower().split(",")[:20]:
        coding, _, params = part.partition(";")
        q = params.strip()
        weights.setdefault(coding.strip(), not (q.startswith("q=") and q[2:].strip().rstrip("0").rstrip(".") in
                                                ("0", "")))
    return weights.get("gzip", weights.get("*", False))


def _response(body: bytes, gzipped: bool) -> HttpResponse:
    resp = HttpResponse(body, content_type="text/html; charset=utf-8")
    if gzipped:
        resp["Content-Encoding"] = "gzip"
    patch_vary_headers(resp, ("Accept-Encoding",))
    return resp
