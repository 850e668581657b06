"""TAC-style SGML/XML source documents.

A source is a file, or a folder (recursive, sorted, hidden files skipped) of
files, each holding one or more documents::

    <DOC id="NYT_ENG_20130914.0094" type="story">   (newswire)
    <doc id='bolt-eng-DF-170-181103-15978'>          (discussion forum)
    <DOC>\\n<DOCID> APW19980213.1310 </DOCID> ...     (older newswire; also <DOCNO>)
    ...
    </DOC>

Text and offsets
----------------
TAC offsets count characters of the raw source, markup included.  A
document's text is therefore the raw text from the ``<`` of ``<DOC`` through
the ``>`` of ``</DOC>``, kept exactly: entities such as ``&amp;`` are not
unescaped and newlines are not normalised.  Offsets count characters (code
points) of the UTF-8-decoded file, read as with ``open(..., newline="")``:
``\\r\\n`` stays two characters.  (A document's offsets are relative to its
own ``<DOC``, as TAC's are.)

Id, title, sentences
--------------------
The id is the ``id`` attribute of the ``<DOC>`` tag (single or double quotes,
any case of ``id``), else the content of the first ``<DOCID>`` or ``<DOCNO>``
element, stripped; character entities in it are unescaped.  The title is the
text of the first ``<HEADLINE>`` or ``<TITLE>`` element (either case), tags
removed, entities unescaped and whitespace collapsed (for display only).
Sentences come from
:func:`~unpooled.core.corpus.sentences.split_markup_sentences`, so they lie
between tags and never include markup.

Errors: a file without any ``<DOC``, a ``<DOC`` without its ``</DOC>`` (the
line where it starts), a document without an id, or an id holding whitespace.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Iterator

from ...errors import CorpusError
from ..model import Document
from ..sentences import split_markup_sentences
from . import Located, list_files, read_text

__all__ = ["iter_located", "iter_tac", "parse_tac"]

# A tag's attributes hold no '<' and an element's text no opening of the same element: each attempt stops at the next
# '<' or opening, so a file of unclosed tags ("<DOC <DOC ...", "<DOCID><DOCID>...") is read in linear time (with
# [^>]* and .*? every opening rescanned the rest of the file: half a megabyte took minutes)
_OPEN = re.compile(r"<(?:DOC|doc)(?=[\s>])[^<>]*>")
_CLOSE = re.compile(r"</(?:DOC|doc)\s*>")
_ID_ATTR = re.compile(r"""\s[iI][dD]\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_ID_ELEM = re.compile(r"<(DOCID|DOCNO|docid|docno)(?:\s[^<>]*)?>((?:(?!<\1[\s>]).)*?)</\1\s*>", re.S)
_TITLE = re.compile(r"<(HEADLINE|headline|TITLE|title)(?:\s[^<>]*)?>((?:(?!<\1[\s>]).)*?)</\1\s*>", re.S)
_TAG = re.compile(r"<[^<>]*>")
_WS = re.compile(r"\s+")


def _clean(fragment: str) -> str:
    """Markup fragment to display text: tags removed, entities unescaped, whitespace collapsed."""
    return _WS.sub(" ", html.unescape(_TAG.sub(" ", fragment))).strip()


def parse_tac(text: str, path: str = "") -> Iterator[tuple[Document, int]]:
    """Yield ``(document, line)`` for each ``<DOC>`` of one file's text.

    Parameters
    ----------
    text : str
        The whole file, decoded.
    path : str
        The file name, for messages and ``source``.

    Raises
    ------
    CorpusError
        No ``<DOC`` in the text, an unclosed ``<DOC``, or a missing/invalid id.
    """
    pos = 0
    line = 1
    line_pos = 0
    found = False
    while True:
        m = _OPEN.search(text, pos)
        if m is None:
            break
        found = True
        line += text.count("\n", line_pos, m.start())
        line_pos = m.start()
        close = _CLOSE.search(text, m.end())
        if close is None or _OPEN.search(text, m.end(), close.start()) is not None:
            raise CorpusError(path, line, f"{m.group()[:60]} is not closed by </DOC>", field="DOC")
        raw = text[m.start():close.end()]
        doc_id = _doc_id(m.group(), raw, path, line)
        t = _TITLE.search(raw)
        title = _clean(t.group(2)) if t else ""
        yield Document(
            id=doc_id, text=raw, title=title, source=f"tac:{path}:{line}", sentences=split_markup_sentences(raw),
        ), line
        pos = close.end()
    if not found:
        raise CorpusError(path, 1, "no <DOC> element found (expected TAC/LDC source documents)", field="DOC")


def _doc_id(open_tag: str, raw: str, path: str, line: int) -> str:
    a = _ID_ATTR.search(open_tag)
    if a is not None:
        value = next(g for g in a.groups() if g is not None)
    else:
        e = _ID_ELEM.search(raw)
        if e is None:
            raise CorpusError(path, line, "document has no id (no id attribute, <DOCID> or <DOCNO>)", field="id")
        value = _TAG.sub("", e.group(2))
    doc_id = html.unescape(value).strip()
    if not doc_id or _WS.search(doc_id):
        raise CorpusError(path, line, f"invalid document id {doc_id!r} (empty or holding whitespace)", field="id")
    return doc_id


def iter_located(path: str | Path) -> Iterator[Located]:
    """Yield ``(document, file, line of its <DOC>)`` for a file or a folder of files."""
    files = list_files(path)
    if not files:
        raise CorpusError(str(path), 0, "empty folder: no source files found")
    for f in files:
        text = read_text(f)
        for doc, line in parse_tac(text, str(f)):
            yield doc, str(f), line


def iter_tac(path: str | Path) -> Iterator[Document]:
    """Stream the documents of a TAC source file or folder (see the module docstring)."""
    for doc, _, _ in iter_located(path):
        yield doc
