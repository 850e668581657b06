"""JSON Lines documents: one JSON object per line.

Each non-blank line is an object::

    {"id": "doc1", "text": "...", "title": "...", "sentences": [[0, 42], [43, 80]]}

* ``id`` (required): a non-empty string.
* ``text`` (required): a string; offsets index it (code points).
* ``title`` (optional): a string, default ``""``.
* ``sentences`` (optional): ``[start, end]`` end-exclusive integer pairs,
  within the text, non-empty, sorted and non-overlapping.  When absent the
  text is split with :func:`~unpooled.core.corpus.sentences.split_sentences`.

Other keys are ignored.  Blank lines are skipped.  Any problem is a
:class:`~unpooled.core.errors.CorpusError` naming the 1-based line and the
field.  A path may be a file or a folder of ``*.jsonl`` files; files are read
line by line.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Iterator

from ... import json_text
from ...errors import CorpusError
from ..model import Document
from ..sentences import split_sentences
from . import Located, decode, list_files, open_binary

__all__ = ["iter_jsonl", "iter_located", "parse_line"]


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _sentences(value: Any, n: int, path: str, line: int) -> list[tuple[int, int]]:
    def err(message: str) -> CorpusError:
        return CorpusError(path, line, message, field="sentences")

    if not isinstance(value, list):
        raise err(f"'sentences' must be a list of [start, end] pairs, got {type(value).__name__}")
    out: list[tuple[int, int]] = []
    prev_end = 0
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2 or not all(_is_int(x) for x in pair):
            raise err(f"sentence {i}: expected [start, end] integers, got {pair!r}")
        s, e = pair
        if not 0 <= s < e <= n:
            raise err(f"sentence {i}: [{s}, {e}] is empty or outside the text (length {n})")
        if s < prev_end:
            raise err(f"sentence {i}: [{s}, {e}] overlaps or precedes the previous sentence (which ends at {prev_end})")
        out.append((s, e))
        prev_end = e
    return out


def parse_line(line_text: str, path: str, line: int) -> Document:
    """Build a :class:`Document` from one JSONL line (not blank).

    Raises
    ------
    CorpusError
        Invalid JSON, not an object, or a missing/invalid field.
    """
    try:
        obj = json_text.loads(line_text)
    except json.JSONDecodeError as exc:
        raise CorpusError(path, line, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise CorpusError(path, line, f"expected a JSON object, got {type(obj).__name__}")
    doc_id = obj.get("id")
    if "id" not in obj:
        raise CorpusError(path, line, "missing 'id'", field="id")
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise CorpusError(path, line, f"'id' must be a non-empty string, got {doc_id!r}", field="id")
    if "text" not in obj:
        raise CorpusError(path, line, "missing 'text'", field="text")
    text = obj["text"]
    if not isinstance(text, str):
        raise CorpusError(path, line, f"'text' must be a string, got {type(text).__name__}", field="text")
    title = obj.get("title", "")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise CorpusError(path, line, f"'title' must be a string, got {type(title).__name__}", field="title")
    if obj.get("sentences") is None:
        sentences = split_sentences(text)
    else:
        sentences = _sentences(obj["sentences"], len(text), path, line)
    return Document(id=doc_id, text=text, title=title, source=f"jsonl:{path}:{line}", sentences=sentences)


#: the longest line (one document) read: a book's text is a few MB
MAX_LINE_BYTES = 64 * 1024 * 1024


def _iter_file(path: Path) -> Iterator[Located]:
    name = str(path)
    offset = 0
    with open_binary(path) as fh:
        try:
            for lineno, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), 1):
                if len(raw) > MAX_LINE_BYTES:
                    raise CorpusError(name, lineno, f"line is longer than {MAX_LINE_BYTES:,} bytes (one document a "
                                                    "line)")
                start = offset
                offset += len(raw)
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                    start += 3
                if not raw.strip():
                    continue
                text = decode(raw, path, base_offset=start, line=lineno)
                yield parse_line(text, name, lineno), name, lineno
        except (OSError, EOFError, zlib.error) as exc:  # a corrupt or truncated gzip stream
            raise CorpusError(name, 0, f"cannot read: {exc}") from None


def iter_located(path: str | Path) -> Iterator[Located]:
    """Yield ``(document, file, line)`` for a JSONL file or a folder of ``*.jsonl`` files."""
    files = list_files(path, (".jsonl", ".ndjson"))
    if not files:
        raise CorpusError(str(path), 0, "no .jsonl files found in the folder")
    for f in files:
        yield from _iter_file(f)


def iter_jsonl(path: str | Path) -> Iterator[Document]:
    """Stream the documents of a JSONL file or folder (see the module docstring)."""
    for doc, _, _ in iter_located(path):
        yield doc
