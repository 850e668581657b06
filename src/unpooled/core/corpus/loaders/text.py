"""Plain-text documents: a ``.txt`` file, or a folder (recursive) of them.

* **id**: the path relative to the folder, without the ``.txt`` (and ``.gz``)
  suffix, with ``/`` separators (``news/2013/a.txt`` -> ``news/2013/a``); for a
  single file, its name without the suffix.
* **title**: the first non-empty line, trimmed, at most 200 characters.
* **text**: the file content decoded as UTF-8, newlines kept as they are
  (``\\r\\n`` stays two characters, as with ``open(..., newline="")``); a leading
  byte-order mark is dropped, as ``utf-8-sig`` readers do.  Invalid UTF-8 is a
  :class:`~unpooled.core.errors.CorpusError` naming the byte offset.
* **sentences**: :func:`~unpooled.core.corpus.sentences.split_sentences`.

Files are read in sorted order of their relative path, one at a time; hidden
files and folders are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ...errors import CorpusError
from ..model import Document
from ..sentences import split_sentences
from . import Located, list_files, read_text, strip_gz

__all__ = ["TITLE_MAX", "iter_located", "iter_text", "text_document"]

#: Longest title taken from a file's first line.
TITLE_MAX = 200


def _title(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:TITLE_MAX]
    return ""


def text_document(doc_id: str, text: str, source: str = "") -> Document:
    """A :class:`Document` for plain text (title from the first non-empty line, split sentences)."""
    return Document(id=doc_id, text=text, title=_title(text), source=source, sentences=split_sentences(text))


def _doc_id(name: str) -> str:
    name = strip_gz(name)
    return name[:-4] if name.lower().endswith(".txt") else name


def iter_located(path: str | Path) -> Iterator[Located]:
    """Yield ``(document, file, 0)`` for a ``.txt`` file or a folder of them."""
    p = Path(path)
    files = list_files(p, (".txt",))
    if not files:
        raise CorpusError(str(path), 0, "no .txt files found in the folder")
    for f in files:
        rel = f.name if f == p else f.relative_to(p).as_posix()
        text = read_text(f)
        if text.startswith("\ufeff"):
            text = text[1:]
        yield text_document(_doc_id(rel), text, source=f"text:{f}"), str(f), 0


def iter_text(path: str | Path) -> Iterator[Document]:
    """Stream the documents of a ``.txt`` file or folder (see the module docstring)."""
    for doc, _, _ in iter_located(path):
        yield doc
