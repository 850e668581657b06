"""DocRED JSON documents with their gold layer (Re-DocRED, DocRED-HWE).

A DocRED file is a JSON list of documents::

    {"title": "...",
     "sents": [["tok", "tok", ...], ...],
     "vertexSet": [[{"name", "pos": [tok_start, tok_end], "sent_id", "type"}, ...], ...],
     "labels": [{"h", "t", "r", "evidence": [sent_id, ...]}, ...]}

Mapping to :class:`~unpooled.core.corpus.model.Document`:

* **text**: every token of every sentence, in order, joined by single spaces
  (exactly; tools outside the project compute offsets this way).  Tokens are
  kept as they are, so a few whitespace tokens (``"\\xa0"``) stay in the text.
* **sentences**: sentence ``i`` spans from the first character of its first
  token to the end of its last token, so ``" ".join(text[s:e] for s, e in
  sentences) == text`` and sentence indices are DocRED's ``sent_id``.
* **mentions**: ``pos`` is ``[tok_start, tok_end)`` within sentence
  ``sent_id``; the span runs from the start of token ``tok_start`` to the end
  of token ``tok_end - 1``.  Each mention keeps its own ``type``.
* **entities**: the ``vertexSet`` clusters; ``index`` is the position in
  ``vertexSet``; the entity's ``type`` is that of its first mention, its
  ``name`` that of its first mention whose name matches its span (below), or
  of the first mention when none does.
* **relations**: ``labels`` (``h`` and ``t`` index ``vertexSet``; ``r`` is the
  predicate; ``evidence`` are sentence indices).  A document without a
  ``labels`` key (e.g. an unlabelled test file) has no relations.

Document ids
------------
DocRED documents have no ids, so the id is derived from the title: the title
with surrounding whitespace removed and every whitespace run replaced by
``_`` (``"I, Frankenstein"`` -> ``"I,_Frankenstein"``; an empty title gives
``"untitled"``).  When several documents of one file share that id, the second
gets ``#2`` appended, the third ``#3``, and so on.  The rule depends only on
the titles, so Re-DocRED and DocRED-HWE, which use the same titles, give the
same document the same id.

Mention names
-------------
A mention's ``name`` is compared with the text at its computed span after
removing all whitespace (DocRED's tokenisation splits ``"55.5%"`` into
``"55.5 %"``, so names and spans differ in spacing in about 2% of mentions).
The real files still hold a few mentions whose name is not the spanned text
(three per file, e.g. name ``"0.\\nLive in New York"`` over ``"Live in New
York"``), so a mismatch is not an error: it is reported through the optional
``warnings`` list as an unraised :class:`~unpooled.core.errors.CorpusError`.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, Iterator

from ... import json_text
from ...errors import CorpusError
from ..model import Document, GoldEntity, GoldMention, GoldRelation
from . import Located, decode, list_files, read_bytes

__all__ = ["document_id_base", "iter_docred", "iter_located", "parse_document"]

_WS = re.compile(r"\s+")


def document_id_base(title: str) -> str:
    """The id a DocRED title gives (before ``#n`` disambiguation)."""
    return _WS.sub("_", title.strip()) or "untitled"


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _load(path: Path) -> list:
    text = decode(read_bytes(path), path).lstrip("\ufeff")
    try:
        data = json_text.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(str(path), exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, list):
        raise CorpusError(str(path), 1, f"expected a JSON list of documents, got {type(data).__name__}")
    return data


def parse_document(
    raw: Any, index: int, doc_id: str, *, path: str = "", warnings: list | None = None
) -> Document:
    """Build a :class:`Document` from one DocRED document object.

    Parameters
    ----------
    raw : object
        The decoded JSON object.
    index : int
        Its position in the file (for messages and ``source``).
    doc_id : str
        The document id to give it.
    path : str
        The file it came from (for messages and ``source``).
    warnings : list, optional
        Receives mention-name mismatches as unraised :class:`CorpusError`.

    Raises
    ------
    CorpusError
        If a field is missing or has the wrong type, or an index is out of range.
    """
    where = f"document {index}"

    def err(message: str, fld: str) -> CorpusError:
        return CorpusError(path, 0, f"{where}: {message}", field=f"[{index}]{fld}")

    if not isinstance(raw, dict):
        raise err(f"expected a JSON object, got {type(raw).__name__}", "")
    title = raw.get("title")
    if not isinstance(title, str):
        raise err("'title' missing or not a string", ".title")
    where = f"document {index} ({title!r})"
    sents = raw.get("sents")
    if not isinstance(sents, list):
        raise err("'sents' missing or not a list of token lists", ".sents")

    # text and token offsets
    offsets: list[list[int]] = []
    sentences: list[tuple[int, int]] = []
    pos = 0
    first = True
    for si, sent in enumerate(sents):
        if not isinstance(sent, list) or not sent:
            raise err("sentence is not a non-empty list of tokens", f".sents[{si}]")
        offs = []
        for ti, tok in enumerate(sent):
            if not isinstance(tok, str):
                raise err(f"token is not a string: {tok!r}", f".sents[{si}][{ti}]")
            if not first:
                pos += 1
            first = False
            offs.append(pos)
            pos += len(tok)
        offsets.append(offs)
        sentences.append((offs[0], pos))
    text = " ".join(tok for sent in sents for tok in sent)
    assert len(text) == pos

    # entities
    vertex_set = raw.get("vertexSet")
    if not isinstance(vertex_set, list):
        raise err("'vertexSet' missing or not a list of entities", ".vertexSet")
    entities: list[GoldEntity] = []
    for ei, cluster in enumerate(vertex_set):
        if not isinstance(cluster, list) or not cluster:
            raise err(f"entity {ei} is not a non-empty list of mentions", f".vertexSet[{ei}]")
        mentions = []
        best_name = None  # the first mention name that matches its span
        for mi, m in enumerate(cluster):
            fld = f".vertexSet[{ei}][{mi}]"
            if not isinstance(m, dict):
                raise err(f"entity {ei} mention {mi} is not an object", fld)
            name, mpos, sid, typ = m.get("name"), m.get("pos"), m.get("sent_id"), m.get("type")
            if not isinstance(name, str):
                raise err(f"entity {ei} mention {mi}: 'name' missing or not a string", fld + ".name")
            if not isinstance(typ, str):
                raise err(f"entity {ei} mention {mi}: 'type' missing or not a string", fld + ".type")
            if not _is_int(sid) or not 0 <= sid < len(sents):
                raise err(f"entity {ei} mention {mi}: 'sent_id' {sid!r} is not a sentence index "
                          f"(0..{len(sents) - 1})", fld + ".sent_id")
            n_tok = len(sents[sid])
            if (not isinstance(mpos, list) or len(mpos) != 2 or not all(_is_int(x) for x in mpos)
                    or not 0 <= mpos[0] < mpos[1] <= n_tok):
                raise err(f"entity {ei} mention {mi}: 'pos' {mpos!r} is not a token range [start, end) "
                          f"within sentence {sid} ({n_tok} tokens)", fld + ".pos")
            start = offsets[sid][mpos[0]]
            end = offsets[sid][mpos[1] - 1] + len(sents[sid][mpos[1] - 1])
            if _WS.sub("", name) != _WS.sub("", text[start:end]):  # ~2.5 µs per mention
                if warnings is not None:
                    warnings.append(CorpusError(
                        path, 0, f"{where} entity {ei} mention {mi}: name {name!r} differs from the text "
                                 f"{text[start:end]!r} at its span {start}-{end}", field=f"[{index}]{fld}.name",
                    ))
            elif best_name is None:
                best_name = name
            mentions.append(GoldMention(entity=ei, start=start, end=end, type=typ, sentence=sid))
        name = best_name if best_name is not None else cluster[0]["name"]
        entities.append(GoldEntity(index=ei, type=mentions[0].type, name=name, mentions=tuple(mentions)))

    # relations
    relations: list[GoldRelation] = []
    labels = raw.get("labels")
    if labels is not None:
        if not isinstance(labels, list):
            raise err("'labels' is not a list", ".labels")
        for li, lab in enumerate(labels):
            fld = f".labels[{li}]"
            if not isinstance(lab, dict):
                raise err(f"label {li} is not an object", fld)
            h, t, r = lab.get("h"), lab.get("t"), lab.get("r")
            for key, val in (("h", h), ("t", t)):
                if not _is_int(val) or not 0 <= val < len(entities):
                    raise err(f"label {li}: '{key}' {val!r} is not an entity index (0..{len(entities) - 1})",
                              f"{fld}.{key}")
            if not isinstance(r, str) or not r:
                raise err(f"label {li}: 'r' missing or not a string", f"{fld}.r")
            evidence = lab.get("evidence", [])
            if not isinstance(evidence, list) or not all(_is_int(x) and 0 <= x < len(sents) for x in evidence):
                raise err(f"label {li}: 'evidence' {evidence!r} is not a list of sentence indices",
                          f"{fld}.evidence")
            relations.append(GoldRelation(subject=h, predicate=r, object=t, evidence=tuple(evidence)))

    return Document(
        # the shown title with HTML entities decoded (a DocRED title has 'UK &amp; Ireland'); the id keeps the raw
        # title, which is what submissions name the document by
        id=doc_id, text=text, title=html.unescape(title), source=f"docred:{path}#{index}", sentences=sentences,
        entities=entities, relations=relations,
    )


def iter_located(path: str | Path, *, warnings: list | None = None) -> Iterator[Located]:
    """Yield ``(document, file, 0)`` for a DocRED file or a folder of ``*.json`` files."""
    files = list_files(path, (".json",))
    if not files:
        raise CorpusError(str(path), 0, "no .json files found in the folder")
    for f in files:
        data = _load(f)
        counts: dict[str, int] = {}
        used: set[str] = set()
        for i, raw in enumerate(data):
            title = raw.get("title") if isinstance(raw, dict) else None
            base = document_id_base(title) if isinstance(title, str) else "untitled"
            n = counts.get(base, 0) + 1
            doc_id = base if n == 1 else f"{base}#{n}"
            while doc_id in used:
                n += 1
                doc_id = f"{base}#{n}"
            counts[base] = n
            used.add(doc_id)
            yield parse_document(raw, i, doc_id, path=str(f), warnings=warnings), str(f), 0


def iter_docred(path: str | Path, *, warnings: list | None = None) -> Iterator[Document]:
    """Stream the documents of a DocRED file (or folder of ``*.json`` files).

    Parameters
    ----------
    path : str or Path
        A DocRED JSON file (optionally gzip-compressed) or a folder of them.
    warnings : list, optional
        Receives mention-name mismatches as unraised :class:`CorpusError`.

    Yields
    ------
    Document
        With its gold entities and relations.
    """
    for doc, _, _ in iter_located(path, warnings=warnings):
        yield doc
