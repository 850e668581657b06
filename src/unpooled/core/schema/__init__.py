"""Relation schemas: built-in (TAC KBP Cold Start, DocRED/Wikidata) and user-supplied files."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import SchemaError
from .model import RelationType, Schema

#: short name -> file in ``unpooled/core/schema/data``
BUILTIN_SCHEMAS = {
    "tac-kbp": "tac_kbp_coldstart.json",
    "docred": "docred.json",
}
#: other names of the built-in schemas, their files' own names among them (diagnostics name a schema by that)
ALIASES = {"tac": "tac-kbp", "kbp": "tac-kbp", "coldstart": "tac-kbp", "tac-kbp-coldstart-2017": "tac-kbp",
           "wikidata": "docred", "redocred": "docred"}


def builtin_schema(name: str) -> Schema:
    """A built-in schema by its short name, an alias or its own name (one object per schema)."""
    key = ALIASES.get(name, name)
    if key not in BUILTIN_SCHEMAS:
        raise SchemaError(name, 0, f"unknown schema {name!r}; built-in schemas: {', '.join(BUILTIN_SCHEMAS)}, "
                          "or give the path of a schema JSON file")
    return _builtin(key)


@lru_cache(maxsize=None)
def _builtin(key: str) -> Schema:
    ref = resources.files(__package__) / "data" / BUILTIN_SCHEMAS[key]
    return Schema.from_dict(__import__("json").loads(ref.read_text(encoding="utf-8")), path=BUILTIN_SCHEMAS[key])


def load_schema(name_or_path: str | Path) -> Schema:
    """A built-in schema by name (``tac-kbp``, ``docred``) or a schema JSON file by path."""
    text = str(name_or_path)
    if ALIASES.get(text, text) in BUILTIN_SCHEMAS:
        return builtin_schema(text)
    path = Path(text)
    if path.suffix == ".json" or path.exists():
        return Schema.from_file(path)
    return builtin_schema(text)  # raises with the list of names


__all__ = ["BUILTIN_SCHEMAS", "RelationType", "Schema", "SchemaError", "builtin_schema", "load_schema"]
