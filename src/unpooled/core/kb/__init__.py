"""Submitted knowledge bases: formats (TAC Cold Start, JSONL), validation, canonical instances."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from ..diagnostics import Report
from ..schema import Schema
from .jsonl import read_jsonl, write_jsonl
from .lines import Limits, open_binary
from .model import KB, CorpusView, Entity, InMemoryCorpus, Instance, Mention, canonical_instance, instance_key
from .tac import read_tac, write_tac

KB_FORMATS = ("tac", "jsonl")


def detect_kb_format(path: str | Path) -> str:
    """``jsonl`` when the name says so or the first non-blank line starts with ``{``; else ``tac``."""
    name = str(path).lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith((".kb", ".tac", ".tsv", ".txt")):
        return "tac"
    try:
        with open_binary(path) as fh:
            for _ in range(50):
                line = fh.readline(4096)
                if not line:
                    break
                if line.strip():
                    return "jsonl" if line.lstrip().startswith(b"{") else "tac"
    except OSError:
        pass
    return "tac"


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
    return reader(source, corpus, schema, path=path, limits=limits)


__all__ = [
    "KB", "KB_FORMATS", "CorpusView", "Entity", "InMemoryCorpus", "Instance", "Limits", "Mention",
    "canonical_instance", "detect_kb_format", "instance_key", "read_jsonl", "read_kb", "read_tac",
    "write_jsonl", "write_tac",
]
