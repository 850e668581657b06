"""Issue 22, item 9: what makes a cached page cheap must never answer what the cache would not.

The file cache keeps, in each process, the text and bytes it read beside the identity of their file; the whole
pages of readers not signed in are kept gzip-compressed too.  Real files in a temporary folder, no mocks.
"""

from __future__ import annotations

import gzip
import os
import time
import zlib
from datetime import datetime, timezone

import pytest

from unpooled.service.config import cache as cache_module
from unpooled.service.config.cache import SafeFileBasedCache
from unpooled.service.web.page_cache import accepts_gzip


@pytest.fixture
def files(tmp_path):
    cache_module._memo.clear()
    cache_module._memo_size = 0
    yield SafeFileBasedCache(str(tmp_path / "c"), {}), SafeFileBasedCache(str(tmp_path / "c"), {})
    cache_module._memo.clear()
    cache_module._memo_size = 0


def _count_reads(monkeypatch) -> list:
    reads = []
    real = zlib.decompress

    def counting(data, *a, **k):
        reads.append(len(data))
        return real(data, *a, **k)

    monkeypatch.setattr(zlib, "decompress", counting)
    return reads


def test_a_second_read_of_an_unchanged_entry_opens_nothing(files, monkeypatch):
    one, _ = files
    one.set("page", b"<html>" + b"x" * 50_000, 60)
    reads = _count_reads(monkeypatch)
    assert one.get("page") == b"<html>" + b"x" * 50_000 and len(reads) == 1
    assert one.get("page") == b"<html>" + b"x" * 50_000 and len(reads) == 1  # the memo, after one stat


def test_every_change_of_the_entry_is_seen(files, monkeypatch):
    """``one`` and ``other`` stand for two processes sharing the folder (the memo is per process: what it keeps
    must follow the file whoever changed it)."""
    one, other = files
    one.set("page", "first", 60)
    assert one.get("page") == "first"
    other.set("page", "second", 60)  # a new file renamed over the old one
    assert one.get("page") == "second"
    assert other.touch("page", 120) and one.get("page") == "second"  # rewritten in place, same value
    path = one._key_to_file("page")
    with open(path, "r+b") as f:  # damaged in place: a miss (and removed), never the kept value
        f.write(b"\x80\x04garbage")
    assert one.get("page") is None and not os.path.exists(path)
    one.set("page", "third", 60)
    assert one.get("page") == "third"
    other.delete("page")
    assert one.get("page") is None
    one.set("page", "fourth", 60)
    assert one.get("page") == "fourth"
    other.clear()
    assert one.get("page", "gone") == "gone"


def test_an_expired_entry_is_not_answered_from_the_memo(files, monkeypatch):
    one, _ = files
    one.set("page", "soon stale", 5)
    assert one.get("page") == "soon stale"
    later = time.time() + 10
    monkeypatch.setattr(time, "time", lambda: later)
    assert one.get("page") is None


def test_only_immutable_values_are_kept(files):
    """A dict read from the cache and changed by its caller must not change what the next caller reads."""
    one, _ = files
    one.set("rows", {"a": [1]}, 60)
    got = one.get("rows")
    got["a"].append(2)
    assert one.get("rows") == {"a": [1]}


def test_the_memo_is_bounded(files, monkeypatch):
    one, _ = files
    monkeypatch.setattr(cache_module, "MEMO_BYTES", 400_000)
    for k in range(20):
        one.set(f"p{k}", bytes([k]) * 40_000, 60)
        assert one.get(f"p{k}") == bytes([k]) * 40_000
    assert cache_module._memo_size <= 400_000 and len(cache_module._memo) == 10
    assert one.get("p0") == bytes([0]) * 40_000  # dropped from the memo, still in the file


@pytest.mark.parametrize("header,expected", [
    ("gzip, deflate, br", True), ("br;q=1.0, gzip;q=0.8", True), ("GZIP", True), ("*", True),
    ("gzip;q=0.001", True), ("gzip;q=0", False), ("gzip; q=0.000", False), ("*, gzip;q=0", False),
    ("*;q=0", False), ("identity", False), ("", False), ("deflate, br", False)])
def test_which_readers_accept_gzip(header, expected):
    assert accepts_gzip(header) is expected


def test_a_time_read_by_a_plain_query_keys_a_page_as_the_orm_s_does():
    from unpooled.service.web.views.submission import _instant

    aware = datetime(2026, 11, 30, 4, 11, 6, 891330, tzinfo=timezone.utc)
    assert _instant(aware) == _instant(aware.replace(tzinfo=None)) == _instant("2026-11-30 04:11:06.891330")
    assert _instant(None) == "0"


def test_gzip_round_trip_of_a_page():
    """What :func:`whole_page` stores for gzip readers is the page (``mtime=0``: the same page, the same bytes)."""
    body = "<html>é</html>".encode() * 1000
    assert gzip.decompress(gzip.compress(body, compresslevel=6, mtime=0)) == body
    assert gzip.compress(body, mtime=0) == gzip.compress(body, mtime=0)
