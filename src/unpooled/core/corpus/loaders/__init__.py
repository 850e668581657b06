"""Corpus loaders: read documents from files in one of :data:`FORMATS`.

========  ==================================================================
format    source
========  ==================================================================
docred    DocRED JSON (Re-DocRED ``*_revised.json``, DocRED-HWE
          ``dev_keys_new.json``): a JSON list of documents with a gold layer;
          a file, or a folder of ``*.json`` files
tac       TAC-style SGML/XML source documents (``<DOC id="...">``); a file or
          a folder (recursive) of files
text      ``.txt`` files; a file or a folder (recursive)
jsonl     one JSON object per line ``{"id", "text", "title"?, "sentences"?}``;
          a file, or a folder of ``*.jsonl`` files
========  ==================================================================

Every format also reads gzip-compressed files (``.gz`` suffix, or gzip magic
bytes); folders list ``name.ext`` and ``name.ext.gz`` alike.  Hidden files and
folders (name starting with ``.``) are skipped.  Folders are read in sorted
order of the relative path, so a load is reproducible.

Exception policy
----------------
Every problem with the input raises :class:`~unpooled.core.errors.CorpusError`
carrying the file path, the 1-based line where meaningful (a JSONL line, the
line where a TAC ``<DOC`` starts, the line of a JSON syntax error or of an
invalid UTF-8 byte; 0 otherwise) and the offending field.  Document ids must be
unique over the whole load; a repeated id is an error naming both places.
Documents are streamed: a folder never sits in memory whole (a DocRED file,
being one JSON list, is parsed whole).
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

from ...errors import CorpusError
from ..model import Document

__all__ = ["FORMATS", "detect_format", "iter_documents"]

#: The corpus formats :func:`iter_documents` reads.
FORMATS = ("docred", "tac", "text", "jsonl")

GZIP_MAGIC = b"\x1f\x8b"

# A loader yields ``(document, path, line)``; ``line`` is 0 when no line is meaningful.
# ``Document.source`` is ``"<format>:<path>:<line>"`` (docred: ``"docred:<path>#<index>"``,
# text: ``"text:<path>"``): where the document came from, also used in error messages.
Located = tuple[Document, str, int]


# ---------------------------------------------------------------------------
# shared helpers (used by the format modules)
# ---------------------------------------------------------------------------

def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with the gzip magic bytes."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise CorpusError(str(path), 0, f"cannot read: {exc.strerror or exc}") from None


def open_binary(path: str | Path) -> BinaryIO:
    """Open a file for binary reading, decompressing gzip transparently."""
    try:
        if is_gzip(path):
            return gzip.open(path, "rb")  # type: ignore[return-value]
        return open(path, "rb")
    except OSError as exc:
        raise CorpusError(str(path), 0, f"cannot read: {exc.strerror or exc}") from None


#: the largest file read whole (decompressed; a DocRED file, a TAC source file): a gzip of a few MB may hold many GB
MAX_FILE_BYTES = 2 * 1024**3


def read_bytes(path: str | Path) -> bytes:
    """The (decompressed) content of a file, at most :data:`MAX_FILE_BYTES` (reading stops there)."""
    try:
        with open_binary(path) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise CorpusError(str(path), 0, f"cannot read: {exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CorpusError(str(path), 0, f"larger than {MAX_FILE_BYTES:,} bytes (decompressed): split it into files")
    return data


def decode(data: bytes, path: str | Path, *, base_offset: int = 0, line: int | None = None) -> str:
    """Decode UTF-8, turning a decode error into a :class:`CorpusError`.

    The error names the byte offset of the first invalid byte (counted in the
    decompressed data for gzip input) and its 1-based line.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = line if line is not None else data.count(b"\n", 0, exc.start) + 1
        raise CorpusError(
            str(path), where, f"not valid UTF-8 at byte offset {base_offset + exc.start} "
                              f"(byte 0x{data[exc.start]:02x})", field="encoding",
        ) from None


def read_text(path: str | Path) -> str:
    """A whole file as text: UTF-8, gzip-aware, newlines kept as they are (``\\r\\n`` stays two characters)."""
    return decode(read_bytes(path), path)


def strip_gz(name: str) -> str:
    """The file name without a trailing ``.gz``."""
    return name[:-3] if name.lower().endswith(".gz") else name


def list_files(path: str | Path, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    """The files of a folder, recursively, sorted by relative path; or ``[path]`` for a file.

    Parameters
    ----------
    path : str or Path
        A file or a folder.
    suffixes : tuple of str, optional
        For a folder, keep only files whose name (without ``.gz``) ends with
        one of these (lower-case, with the dot).  None keeps every file.

    Raises
    ------
    CorpusError
        If the path does not exist.
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise CorpusError(str(path), 0, "no such file or folder")
    found: list[tuple[str, Path]] = []
    for root, dirs, files in os.walk(p):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if f.startswith("."):
                continue
            if suffixes is not None and not strip_gz(f).lower().endswith(suffixes):
                continue
            full = Path(root) / f
            found.append((full.relative_to(p).as_posix(), full))
    found.sort(key=lambda t: t[0])
    return [f for _, f in found]


def line_of(text: str, pos: int) -> int:
    """1-based line of character ``pos``."""
    return text.count("\n", 0, pos) + 1


# ---------------------------------------------------------------------------
# format detection
# ---------------------------------------------------------------------------

_TAC_HEAD = re.compile(r"(?:<\?xml[^>]*>|<!--.*?-->|<!DOCTYPE[^>]*>|\s)*<(?:DOC|doc)[\s>]", re.S)
_TAC_ANY = re.compile(r"<(?:DOC|doc)[\s>]")
_SUFFIX_FORMATS = {
    ".json": "docred", ".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "text",
    ".xml": "tac", ".sgm": "tac", ".sgml": "tac",
}


def _head(path: Path, n: int = 65536) -> str:
    try:
        with open_binary(path) as fh:
            data = fh.read(n)
    except (OSError, EOFError, zlib.error) as exc:
        raise CorpusError(str(path), 0, f"cannot read: {exc}") from None
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def _sniff(path: Path) -> str | None:
    """The format of one file from its content, then its suffix; None if unknown."""
    head = _head(path)
    body = head.lstrip()
    if body.startswith("["):
        return "docred"
    if body.startswith("{"):
        return "jsonl"
    if _TAC_HEAD.match(head) or (body.startswith("<") and _TAC_ANY.search(head)):
        return "tac"
    name = strip_gz(path.name).lower()
    return _SUFFIX_FORMATS.get(Path(name).suffix)


def detect_format(path: str | Path) -> str:
    """Guess the format of a corpus file or folder.

    A file is classified by content first (a JSON list: ``docred``; a JSON
    object: ``jsonl``; ``<DOC``/``<doc`` markup: ``tac``), then by suffix
    (``.json``, ``.jsonl``/``.ndjson``, ``.txt``, ``.xml``/``.sgm``/``.sgml``),
    looking through gzip compression.  A folder is classified by its first
    files (sorted), which must agree.

    Parameters
    ----------
    path : str or Path
        A corpus file or folder.

    Returns
    -------
    str
        One of :data:`FORMATS`.

    Raises
    ------
    CorpusError
        If the path does not exist, is an empty folder, or the format cannot be told.
    """
    files = list_files(path)
    if not files:
        raise CorpusError(str(path), 0, "empty folder: no corpus files found")
    seen: dict[str, Path] = {}
    for f in files[:20]:
        fmt = _sniff(f)
        if fmt is not None:
            seen.setdefault(fmt, f)
    if len(seen) == 1:
        return next(iter(seen))
    if not seen:
        raise CorpusError(str(path), 0, f"cannot detect the corpus format; pass --format (one of {', '.join(FORMATS)})")
    kinds = ", ".join(f"{k} ({v})" for k, v in seen.items())
    raise CorpusError(str(path), 0, f"files of several formats: {kinds}; pass --format or load them separately")


# ---------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------

def iter_located(path: str | Path, fmt: str, *, warnings: list | None = None) -> Iterator[Located]:
    """Like :func:`iter_documents`, yielding ``(document, file path, line)`` and not checking ids."""
    from . import docred, jsonl, tac, text

    if fmt == "docred":
        return docred.iter_located(path, warnings=warnings)
    if fmt == "tac":
        return tac.iter_located(path)
    if fmt == "text":
        return text.iter_located(path)
    if fmt == "jsonl":
        return jsonl.iter_located(path)
    raise CorpusError(str(path), 0, f"unknown corpus format {fmt!r}; use one of {', '.join(FORMATS)}", field="format")


def iter_documents(path: str | Path, fmt: str, *, warnings: list | None = None) -> Iterator[Document]:
    """Stream the documents of a corpus file or folder.

    Parameters
    ----------
    path : str or Path
        A file or a folder (see the module docstring for what each format reads).
    fmt : str
        One of :data:`FORMATS` (see :func:`detect_format`).
    warnings : list, optional
        Receives problems that do not stop the load, as (unraised)
        :class:`CorpusError` objects: for ``docred``, gold mentions whose
        ``name`` differs from the text at their span.

    Yields
    ------
    Document

    Raises
    ------
    CorpusError
        On any problem with the input, including a document id seen twice in
        the load (the message names both places).
    """
    seen: dict[str, str] = {}
    for doc, file, line in iter_located(path, fmt, warnings=warnings):
        first = seen.get(doc.id)
        if first is not None:
            here = "" if line else f"{doc.source}; "  # without a line, say which document of the file
            raise CorpusError(file, line, f"duplicate document id {doc.id!r} ({here}first at {first})", field="id")
        seen[doc.id] = doc.source
        yield doc
