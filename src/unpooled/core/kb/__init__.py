"""Submitted knowledge bases: formats (TAC Cold Start, JSONL), validation, canonical instances."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import BinaryIO

from ..diagnostics import Report
from ..schema import Schema
from .jsonl import read_jsonl, write_jsonl
from .lines import Limits, open_binary
from .model import KB, CorpusView, Entity, InMemoryCorpus, Instance, Mention, canonical_instance, instance_key
from .tac import read_tac, write_tac

KB_FORMATS = ("tac", "jsonl")
UTF8_BOM = b"\xef\xbb\xbf"


def _head(path: str | Path, n: int) -> list[bytes] | None:
    """The first ``n`` non-blank lines of the (decompressed) file, stripped, the first without a UTF-8 byte order
    mark (an editor's, which JSONL and TAC readers drop too); None when nothing can be read. A corrupt or truncated
    gzip gives the lines read before it breaks: the reader reports it where it is (UP100), not the sniffing."""
    lines: list[bytes] = []
    try:
        with open_binary(path) as fh:
            for _ in range(50):
                line = fh.readline(4096)
                if not line:
                    break
                line = (line.removeprefix(UTF8_BOM) if not lines else line).strip()
                if line:
                    lines.append(line)
                    if len(lines) == n:
                        break
    except (OSError, EOFError, zlib.error):
        return lines or None
    return lines


def detect_kb_format(path: str | Path) -> str:
    """``jsonl`` when the name says so or the first non-blank line starts with ``{``; else ``tac``."""
    name = str(path).lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith((".kb", ".tac", ".tsv", ".txt")):
        return "tac"
    first = _head(path, 1)
    return "jsonl" if first and first[0].startswith(b"{") else "tac"


#: how each submission format looks, for the hint on a file in the other one
FORMAT_LOOKS = {"tac": "a TAC KB (a run id line, then tab-separated lines)",
                "jsonl": "JSONL (one JSON object a line)"}


def sniff_kb_content(path: str | Path) -> str | None:
    """The format the file's first non-blank lines look like: ``jsonl`` (a JSON object), ``tac`` (a run id
    alone on its line or three or more tab-separated columns), or ``None`` (neither, or unreadable)."""
    lines = _head(path, 2)
    if not lines:
        return None
    first = lines[0]
    if first.startswith(b"{") and first.endswith(b"}"):
        return "jsonl"
    if first.count(b"\t") >= 2 or (b"\t" not in first and b" " not in first and b"{" not in first
                                     and (len(lines) == 1 or lines[1].count(b"\t") >= 2)):
        return "tac"
    return None


def read_kb(
    source: str | Path | BinaryIO,
    corpus: CorpusView,
    schema: Schema,
    *,
    fmt: str | None = None,
    path: str | None = None,
    limits: Limits = Limits(),
) -> tuple[KB | None, Report]:
    """Parse and validate a submission in ``fmt`` (detected from the file when None)."""
    if fmt is None:
        if not isinstance(source, (str, Path)):
            raise ValueError("fmt: give the format ('tac' or 'jsonl') when reading from a stream")
        fmt = detect_kb_format(source)
    if fmt not in KB_FORMATS:
        raise ValueError(f"fmt: expected one of {', '.join(KB_FORMATS)}, got {fmt!r}")
    reader = read_tac if fmt == "tac" else read_jsonl
    kb, report = reader(source, corpus, schema, path=path, limits=limits)
    if not report.ok and isinstance(source, (str, Path)):
        looks = sniff_kb_content(source)
        if looks is not None and looks != fmt:
            # said first (line 0: the whole file): the errors that follow come from reading it as the wrong format
            report.add(0, "UP113", f"this file looks like {FORMAT_LOOKS[looks]}, but it was read as "
                                   f"{FORMAT_LOOKS[fmt]}: the errors below may all come from that",
                       help=f"read it as {looks}: give the format {looks} (--format {looks})"
                            + (", or leave the format out to have it detected" if detect_kb_format(source) == looks
                               else f", or rename it (its name says {fmt})"))
    return kb, report


__all__ = [
    "KB", "KB_FORMATS", "CorpusView", "Entity", "InMemoryCorpus", "Instance", "Limits", "Mention",
    "FORMAT_LOOKS", "canonical_instance", "detect_kb_format", "instance_key", "read_jsonl", "read_kb", "read_tac",
    "sniff_kb_content", "write_jsonl", "write_tac",
]
