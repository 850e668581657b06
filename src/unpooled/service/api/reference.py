"""The REST API reference as Markdown, generated from the OpenAPI schema the service serves.

The documentation site's *REST API* page is :func:`api_reference` of the schema of ``/api/openapi.json``
(``tools/mkdocs_hooks.py`` calls it at build time, offline): every endpoint grouped by tag, its parameters,
request body and responses, then every schema the responses name.
"""

from __future__ import annotations

import html
import re

METHODS = ("get", "post", "put", "patch", "delete")


def _cell(text) -> str:
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _type(schema: dict) -> str:
    """A short Markdown description of a JSON schema's type: ``string``, ``integer ≥ 1``, a link to a schema."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in schema:
        kinds = [_type(s) for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = len(kinds) < len(schema["anyOf"])
        return " or ".join(dict.fromkeys(kinds)) + (" or null" if nullable else "")
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" if v != "" else '`""`' for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if schema.get("format") == "binary":
        return "file"
    bounds = []
    if "minimum" in schema:
        bounds.append(f"≥ {schema['minimum']}")
    if "maximum" in schema:
        bounds.append(f"≤ {schema['maximum']}")
    if "maxLength" in schema:
        bounds.append(f"at most {schema['maxLength']} characters")
    if schema.get("format"):
        kind += f" ({schema['format']})"
    return kind + (" " + ", ".join(bounds) if bounds else "")


def _default(schema: dict) -> str:
    if "default" not in schema or schema["default"] in ("", [], None):
        return ""
    return f"default `{schema['default']}`"


def _describe(schema: dict) -> str:
    text = schema.get("description") or ""
    if not text and "anyOf" in schema:
        text = next((s.get("description") for s in schema["anyOf"] if s.get("description")), "")
    return _cell(text)


def _parameters(op: dict) -> list[str]:
    params = op.get("parameters") or []
    if not params:
        return []
    out = ["| parameter | in | type | |", "|---|---|---|---|"]
    for p in params:
        schema = p.get("schema", {})
        notes = [n for n in ("required" if p.get("required") else "", _default(schema),
                             _describe(p) or _describe(schema)) if n]
        out.append(f"| `{p['name']}` | {p['in']} | {_type(schema)} | {'; '.join(notes)} |")
    return out + [""]


def _fields(schema: dict) -> list[str]:
    props = schema.get("properties") or {}
    if not props:
        return []
    required = set(schema.get("required") or ())
    out = ["| field | type | |", "|---|---|---|"]
    for name, prop in props.items():
        notes = [n for n in ("required" if name in required else "", _default(prop), _describe(prop)) if n]
        out.append(f"| `{name}` | {_type(prop)} | {'; '.join(notes)} |")
    return out + [""]


def _request_body(op: dict) -> list[str]:
    body = op.get("requestBody")
    if not body:
        return []
    out = []
    for ctype, content in (body.get("content") or {}).items():
        schema = content.get("schema", {})
        out += [f"Request body (`{ctype}`): {_type(schema) if '$ref' in schema else ''}", ""]
        if "$ref" not in schema:
            out += _fields(schema)
    return out


def _responses(op: dict) -> list[str]:
    out = ["| status | body |", "|---|---|"]
    for status, resp in sorted((op.get("responses") or {}).items()):
        bodies = [_type(c.get("schema", {})) if c.get("schema") else f"`{ctype}`"
                  for ctype, c in (resp.get("content") or {}).items()]
        what = _cell(resp.get("description") or "")
        out.append(f"| {status} | {what}{': ' if bodies and what else ''}{', '.join(bodies)} |")
    return out + [""]


def _operation(path: str, method: str, op: dict) -> list[str]:
    out = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        out += [_cell(op["summary"]), ""]
    if op.get("description"):
        out += [op["description"].strip(), ""]
    security = op.get("security")
    if security is not None:
        schemes = sorted({name for req in security for name in req})
        anonymous = any(not req for req in security)
        who = " or ".join(schemes) or "none"
        out += [f"Authentication: {who}{' (optional: without it, public data)' if anonymous and schemes else ''}.",
                ""]
    return out + _parameters(op) + _request_body(op) + _responses(op)


def _operations_by_tag(schema: dict) -> dict[str, list[tuple[str, str, dict]]]:
    groups: dict[str, list[tuple[str, str, dict]]] = {}
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                op = item[method]
                tag = (op.get("tags") or ["other"])[0]
                groups.setdefault(tag, []).append((path, method, op))
    return groups


def api_reference(schema: dict) -> str:
    """The Markdown page documenting the OpenAPI ``schema``: endpoints by tag, then the schemas."""
    info = schema.get("info", {})
    out = ["# REST API reference", "",
           f"Generated from the service's OpenAPI schema ({_cell(info.get('title', ''))} {info.get('version', '')}) "
           "when this site was built. A running service serves the same schema at `/api/openapi.json` and an "
           "interactive page at `/api/docs`.", ""]
    if info.get("description"):
        out += [info["description"].strip(), ""]
    schemes = schema.get("components", {}).get("securitySchemes", {})
    if schemes:
        out += ["Authentication schemes: " + "; ".join(
            f"`{name}`: {s.get('scheme') or s.get('name')} {s.get('type')}"
            + (f" ({s['in']})" if s.get("in") else "") for name, s in schemes.items()) + ".", ""]
    groups = _operations_by_tag(schema)
    out += ["## Endpoints", ""]
    for tag, ops in groups.items():
        out += [f"| {tag} | |", "|---|---|"]
        out += [f"| `{m.upper()} {p}` | {_cell(op.get('summary', ''))} |" for p, m, op in ops]
        out.append("")
    for tag, ops in groups.items():
        out += [f"## {tag.capitalize()}", ""]
        for path, method, op in ops:
            out += _operation(path, method, op)
    out += ["## Schemas", ""]
    for name, s in schema.get("components", {}).get("schemas", {}).items():
        out += [f"### {name} {{#{_anchor(name)}}}", ""]
        if s.get("description"):
            out += [_cell(s["description"]), ""]
        out += _fields(s) or [f"Type: {_type(s)}", ""]
    return "\n".join(out).rstrip() + "\n"


def served_schema() -> dict:
    """The OpenAPI schema ``/api/openapi.json`` serves (Django must be set up)."""
    from .api import api

    return api.get_openapi_schema(path_prefix="/api/")
