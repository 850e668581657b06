"""Names for people: a schema's predicate codes with their descriptions ("P569" -> "date of birth"), so that no page
shows a bare P-code, and the order codes are listed in (by their number: P17 before P131); where a document came
from without the server's directories (:func:`public_source`)."""

from __future__ import annotations

import logging
import re
from pathlib import PurePath

from .models import Corpus, RelationSchema

log = logging.getLogger(__name__)


def schema_relation_names(schema: RelationSchema) -> dict[str, str]:
    """Predicate code -> its description in ``schema`` (codes without a description are left out)."""
    try:
        parsed = schema.schema()
    except Exception:  # noqa: BLE001 - names are a convenience: the codes stand alone
        log.exception("schema %s", schema.name)
        return {}
    return {name: r.description for name, r in parsed.relations.items() if r.description}


def relation_names(corpus: Corpus | None) -> dict[str, str]:
    """Predicate code -> description in the corpus's schema; without a corpus, every stored schema's (the first
    schema by name wins a code two schemas describe)."""
    if corpus is not None:
        return schema_relation_names(corpus.schema)
    out: dict[str, str] = {}
    for schema in RelationSchema.objects.order_by("name"):
        for code, name in schema_relation_names(schema).items():
            out.setdefault(code, name)
    return out


def relation_label(code: str, names: dict[str, str]) -> str:
    """``"P569 date of birth"``; the code alone when the schema does not describe it (or names it by itself)."""
    name = names.get(code, "")
    return f"{code} {name}" if name and name != code else code


_NUM = re.compile(r"(\d+)")


def predicate_order(code: str) -> tuple:
    """Sort key of a predicate code: its digits as numbers ("P17" < "P131"), then the text."""
    return tuple(int(p) if p.isdigit() else p for p in _NUM.split(code)), code


_SOURCE = re.compile(r"^(?P<fmt>[a-z]+):(?P<path>.*?)(?P<where>(#\d+|:\d+)?)$")


def public_source(source: str) -> str:
    """A document's ``source`` (``"docred:/srv/data/dev.json#3"``) with the file's name only
    (``"docred:dev.json#3"``): which directory the corpus was loaded from is the server's business."""
    m = _SOURCE.match(source or "")
    if not m or not m["path"]:
        return PurePath(source).name if source else ""
    return f"{m['fmt']}:{PurePath(m['path']).name}{m['where']}"
