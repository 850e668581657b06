"""Reading submission files line by line: the decompressed size limit holds inside an over-long line too (D6).

The sources here are streams that make their bytes as they are read and count them, so a bomb of a
gigabyte or more costs nothing to build and the test sees exactly how much of it was consumed.
"""

from __future__ import annotations

import gzip
import io

import pytest

from unpooled.core.diagnostics import Report
from unpooled.core.kb.lines import Limits, read_lines


class Repeating(io.RawIOBase):
    """``head`` then ``unit`` repeated ``times`` times, made while read; ``consumed`` counts the bytes handed out."""

    def __init__(self, unit: bytes, times: int, head: bytes = b"") -> None:
        self.data = head
        self.unit, self.left, self.consumed = unit, times, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while len(self.data) < len(buf) and self.left:
            self.data += self.unit
            self.left -= 1
        n = min(len(buf), len(self.data))
        buf[:n] = self.data[:n]
        self.data = self.data[n:]
        self.consumed += n
        return n

    @property
    def size(self) -> int:
        return self.consumed + len(self.data) + self.left * len(self.unit)


MiB = 1 << 20


def read_all(source, limits: Limits) -> tuple[list, Report]:
    rep = Report(path="bomb")
    return list(read_lines(source, rep, limits=limits)), rep


def test_gzip_of_one_endless_line_stops_at_the_size_limit():
    """1 GiB of one line in about 1 MB of gzip (1,024 members of 1 MiB of ``a`` each), limit 10 MB: the reader
    stops at the limit; the probe saw the whole gigabyte decompressed before the rejection."""
    member = gzip.compress(b"a" * MiB, compresslevel=9, mtime=0)
    src = Repeating(member, 1024)
    total = src.size
    lines, rep = read_all(src, Limits(max_bytes=10 * MiB, max_line=100_000))
    assert lines == []
    assert [d.code for d in rep.errors] == ["UP101", "UP110"]
    assert [d.line for d in rep.errors] == [1, 1]
    assert "limit of 10,485,760 bytes (decompressed)" in rep.errors[1].message
    # 10 MiB decompressed are about 10 members; the gzip reader's read-ahead adds at most a few more
    assert src.consumed < 40 * len(member), (src.consumed, total)
    assert src.consumed < total / 20


def test_plain_endless_line_stops_at_the_size_limit():
    """The same without gzip: 4 GiB of one line, limit 1 MiB."""
    src = Repeating(b"b" * MiB, 4096)
    lines, rep = read_all(src, Limits(max_bytes=MiB, max_line=1000))
    assert lines == [] and [d.code for d in rep.errors] == ["UP101", "UP110"]
    assert src.consumed <= 2 * MiB + 64 * 1024, src.consumed


def test_gzip_bomb_of_many_short_lines_stops_at_the_size_limit():
    member = gzip.compress(b"x\n" * (MiB // 2), compresslevel=9, mtime=0)
    src = Repeating(member, 2048)  # 2 GiB of two-byte lines
    n = 0
    rep = Report(path="bomb")
    for n, _ in read_lines(src, rep, limits=Limits(max_bytes=4 * MiB)):
        pass
    assert [d.code for d in rep.errors] == ["UP110"]
    assert n == 2 * MiB  # every whole line within the limit was read, none after
    assert src.consumed < src.size / 50


@pytest.mark.parametrize("max_bytes", [5, 12, 13, 100])
def test_limit_is_exact_on_small_inputs(max_bytes):
    """Lines up to the limit are read; one byte more is UP110, whatever the line length limit."""
    data = b"hello\nworld\n"  # 12 bytes
    lines, rep = read_all(io.BytesIO(data), Limits(max_bytes=max_bytes, max_line=3))
    codes = [d.code for d in rep.errors]
    if max_bytes >= len(data):
        assert codes == ["UP101", "UP101"] and lines == []
    else:
        assert codes[-1] == "UP110"
    lines, rep = read_all(io.BytesIO(data), Limits(max_bytes=max_bytes, max_line=100))
    if max_bytes >= len(data):
        assert rep.ok and lines == [(1, "hello"), (2, "world")]
    else:
        assert [d.code for d in rep.errors] == ["UP110"] and len(lines) == (1 if max_bytes >= 6 else 0)


@pytest.mark.parametrize("encoding, bom", [("utf-16-le", "FF FE"), ("utf-16-be", "FE FF")])
def test_a_utf16_file_is_one_error_that_names_its_encoding(encoding, bom):
    """Spreadsheets save "Unicode text" as UTF-16: every line was a UP102 NUL error, 'is this a binary file?';
    now one error at line 1 that says what the file is and stops."""
    data = ("\ufeff" + '{"doc": "D1"}\n' * 5).encode(encoding)
    rep = Report(path="x.jsonl")
    assert list(read_lines(io.BytesIO(data), rep)) == []
    (d,) = rep.errors
    assert (d.line, d.code) == (1, "UP102")
    assert d.message == f"the file is UTF-16 (byte-order mark {bom}), not UTF-8" and "save it as UTF-8" in d.help
