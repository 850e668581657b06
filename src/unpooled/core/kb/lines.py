"""Reading submission files as a stream of located, decoded lines.

Handles gzip (by magic bytes, not by name), a size limit on the *decompressed*
input (so a gzip bomb is refused too), over-long lines and undecodable bytes,
each reported as a located diagnostic instead of an exception.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from ..diagnostics import Report, excerpt

GZIP_MAGIC = b"\x1f\x8b"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
DEFAULT_MAX_BYTES = 2 * 1024**3  # 2 GiB decompressed
DEFAULT_MAX_LINE = 100_000  # characters (bytes) per line


@dataclass(frozen=True)
class Limits:
    """Size limits applied while reading a submission."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_line: int = DEFAULT_MAX_LINE

    @classmethod
    def from_env(cls) -> "Limits":
        """Limits from ``UNPOOLED_MAX_UPLOAD_BYTES`` / ``UNPOOLED_MAX_LINE_BYTES`` when set."""
        return cls(
            max_bytes=int(os.environ.get("UNPOOLED_MAX_UPLOAD_BYTES", DEFAULT_MAX_BYTES)),
            max_line=int(os.environ.get("UNPOOLED_MAX_LINE_BYTES", DEFAULT_MAX_LINE)),
        )


def open_binary(source: str | Path | BinaryIO) -> BinaryIO:
    """A binary stream of the decompressed content (gzip detected by its magic bytes)."""
    raw: BinaryIO = open(source, "rb") if isinstance(source, (str, Path)) else source
    if not isinstance(raw, io.BufferedReader) and not hasattr(raw, "peek"):
        raw = io.BufferedReader(raw)  # type: ignore[arg-type]
    head = raw.peek(2)[:2]  # type: ignore[attr-defined]
    if head == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _too_large(report: Report, lineno: int, limits: Limits) -> None:
    report.add(
        lineno, "UP110", f"the file is larger than the limit of {limits.max_bytes:,} bytes (decompressed)",
        help="raise UNPOOLED_MAX_UPLOAD_BYTES or split the submission",
    )


def _skip_rest(stream, raw: bytes, total: int, lineno: int, limits: Limits, report: Report) -> int | None:
    """Skip the rest of an over-long line, never reading past the size limit (a gzip whose content is one endless
    line stops there, as any other oversized file does); the bytes read so far, or None when reading must stop."""
    rest = raw
    while rest and not rest.endswith(b"\n"):
        try:
            rest = stream.readline(min(1 << 20, limits.max_bytes - total + 1))
        except (OSError, EOFError, zlib.error) as exc:
            report.add(lineno, "UP100", f"the file is corrupt (gzip): {exc}")
            return None
        total += len(rest)
        if total > limits.max_bytes:
            _too_large(report, lineno, limits)
            return None
    return total


def read_lines(
    source: str | Path | BinaryIO, report: Report, *, limits: Limits = Limits()
) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` for every line that can be read.

    Problems go to ``report``: UP100 (unreadable or corrupt gzip), UP101
    (line longer than ``limits.max_line`` bytes), UP102 (not UTF-8, or a NUL byte; a UTF-16 file, by its
    byte-order mark, is one UP102 at line 1 and nothing is read), UP110
    (more than ``limits.max_bytes`` bytes after decompression; reading stops there, inside an over-long
    line too: no more than ``limits.max_bytes + 1`` decompressed bytes are asked of the stream).
    Lines are returned without their line terminator; a UTF-8 BOM on line 1
    is dropped.
    """
    try:
        stream = open_binary(source)
    except OSError as exc:
        report.add(0, "UP100", f"cannot open the file: {exc.strerror or exc}")
        return
    total = 0
    lineno = 0
    try:
        with stream:
            while True:
                try:
                    raw = stream.readline(min(limits.max_line + 2, limits.max_bytes - total + 1))
                except (OSError, EOFError, zlib.error) as exc:
                    report.add(lineno + 1, "UP100", f"the file is corrupt (gzip): {exc}")
                    return
                if not raw:
                    return
                lineno += 1
                total += len(raw)
                if total > limits.max_bytes:
                    _too_large(report, lineno, limits)
                    return
                if len(raw) > limits.max_line and len(raw.rstrip(b"\r\n")) > limits.max_line:
                    report.add(
                        lineno, "UP101", f"line is longer than {limits.max_line:,} bytes",
                        text=raw[:80].replace(b"\x00", b"\xef\xbf\xbd").decode("utf-8", "replace"),
                        help="raise UNPOOLED_MAX_LINE_BYTES if such lines are legitimate",
                    )
                    total = _skip_rest(stream, raw, total, lineno, limits, report)
                    if total is None:
                        return
                    continue
                if lineno == 1 and raw[:2] in UTF16_BOMS:  # a spreadsheet's "Unicode text": every line has NULs
                    report.add(lineno, "UP102", f"the file is UTF-16 (byte-order mark {raw[:2].hex(' ').upper()}), "
                                                "not UTF-8", help="save it as UTF-8 (\"UTF-8\" or \"CSV UTF-8\", not "
                                                                  "\"Unicode text\")")
                    return
                nul = raw.find(b"\x00")
                if nul >= 0:  # valid UTF-8, but no text has it (and a database text column refuses it)
                    report.add(
                        lineno, "UP102", f"byte 0x00 (NUL) at byte {nul + 1}: a text line has no NUL bytes",
                        col=nul + 1, text=excerpt(raw.replace(b"\x00", b"\xef\xbf\xbd").decode("utf-8", "replace")),
                        help="submissions are UTF-8 text; is this a binary file?",
                    )
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    report.add(
                        lineno, "UP102",
                        f"bytes {raw[exc.start:exc.start + 4]!r} at byte {exc.start + 1} are not valid UTF-8",
                        col=exc.start + 1, text=excerpt(raw.decode("utf-8", "replace")),
                        help="submissions must be UTF-8 encoded",
                    )
                    continue
                if lineno == 1 and text.startswith("\ufeff"):
                    text = text[1:]
                yield lineno, text.rstrip("\r\n")
    except OSError as exc:  # pragma: no cover - close errors
        report.add(lineno, "UP100", f"cannot read the file: {exc}")
