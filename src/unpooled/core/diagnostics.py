"""Located diagnostics for files and submissions.

Every problem found in an input file becomes a :class:`Diagnostic` that names
the file, the line (1-based), the column, the field, a stable code and the
offending text.  Codes are stable across releases:

* ``UP1xx`` -- format problems (a line cannot be read as the format says);
* ``UP2xx`` -- consistency problems (the line reads, but contradicts the
  corpus, the schema or another line).

A :class:`Report` collects diagnostics.  It keeps every count exact but stores
at most ``max_per_code`` diagnostics per code, so a broken million-line file
cannot exhaust memory.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Iterable, TextIO

ERROR = "error"
WARNING = "warning"

#: code -> (default severity, short title).  The single registry of codes.
CODES: dict[str, tuple[str, str]] = {
    # -- format ---------------------------------------------------------
    "UP100": (ERROR, "file cannot be read"),
    "UP101": (ERROR, "line too long"),
    "UP102": (ERROR, "undecodable bytes"),
    "UP103": (ERROR, "malformed line"),
    "UP104": (ERROR, "missing or malformed run id"),
    "UP105": (ERROR, "malformed provenance"),
    "UP106": (ERROR, "malformed JSON"),
    "UP107": (ERROR, "missing or invalid field"),
    "UP108": (ERROR, "invalid offsets"),
    "UP109": (ERROR, "invalid confidence"),
    "UP110": (ERROR, "file too large"),
    "UP111": (ERROR, "malformed quoted string"),
    "UP112": (ERROR, "empty submission"),
    "UP113": (ERROR, "file in the other submission format"),
    # -- consistency ----------------------------------------------------
    "UP201": (ERROR, "unknown document"),
    "UP202": (ERROR, "offsets outside the document"),
    "UP203": (ERROR, "mention text does not match the offsets"),
    "UP204": (ERROR, "unknown predicate"),
    "UP205": (ERROR, "argument type not allowed by the schema"),
    "UP206": (ERROR, "self-relation"),
    "UP207": (ERROR, "conflicting entity types"),
    "UP208": (ERROR, "string-valued slot without filler provenance"),
    "UP209": (WARNING, "duplicate instance"),
    "UP210": (ERROR, "relation to an undefined entity"),
    "UP211": (ERROR, "entity without a type"),
    "UP212": (WARNING, "argument mention outside the justification"),
    "UP213": (ERROR, "entity has no mention in the provenance document"),
    "UP214": (ERROR, "provenance spans several documents"),
    "UP215": (WARNING, "several values for a single-valued slot"),
    "UP216": (WARNING, "conflicting canonical mentions"),
    "UP217": (ERROR, "entity type not in the schema"),
    "UP218": (ERROR, "object kind does not match the predicate"),
    "UP219": (WARNING, "mention claimed by several entities"),
    "UP221": (WARNING, "entity without mentions"),
    # -- offline scoring inputs ---------------------------------------------
    "UP230": (ERROR, "unknown system"),
    "UP231": (ERROR, "labelled instance not submitted by the system"),
}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One located problem.

    ``line`` and ``col`` are 1-based; 0 means "the whole file".  ``text`` is
    the offending input (truncated), ``field`` the column or JSON field.
    """

    path: str
    line: int
    code: str
    message: str
    severity: str = ERROR
    col: int = 0
    field: str = ""
    text: str = ""
    help: str = ""

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in ("", None) or k in ("path",)}

    def format(self) -> str:
        """``path:line:col: CODE message`` (ruff's concise format) plus detail lines."""
        loc = f"{self.path}:{self.line}:{max(self.col, 1) if self.line else 0}"
        out = f"{loc}: {self.code} {self.message}"
        if self.field:
            out += f" [{self.field}]"
        if self.text:
            out += f"\n  | {self.text}"
        if self.help:
            out += f"\n  = help: {self.help}"
        return out


def excerpt(text: str, limit: int = 120, col: int = 0) -> str:
    """The offending text, shortened to ``limit`` characters for a report: its start, or, when the fault is at
    column ``col`` (1-based) beyond that, a window around it (UX review #12: a line's first 110 characters never
    showed an ``"end": 999999`` further on)."""
    text = text.rstrip("\r\n")
    if len(text) <= limit:
        return text
    if col > limit - 20:
        start = max(0, min(col - 1 - limit // 2, len(text) - (limit - 2)))
        return "\u2026" + text[start:start + limit - 2] + ("\u2026" if start + limit - 2 < len(text) else "")
    return text[: limit - 1] + "\u2026"


@dataclass
class Report:
    """Collects diagnostics for one input; exact counts, bounded storage."""

    path: str = "<input>"
    max_per_code: int = 200
    diagnostics: list[Diagnostic] = field(default_factory=list)
    code_counts: Counter = field(default_factory=Counter)
    counts: dict = field(default_factory=dict)
    _errors: int = 0
    _warnings: int = 0

    def add(
        self,
        line: int,
        code: str,
        message: str,
        *,
        field: str = "",
        text: str = "",
        help: str = "",
        col: int = 0,
        severity: str | None = None,
    ) -> None:
        sev = severity or CODES[code][0]
        if sev == ERROR:
            self._errors += 1
        else:
            self._warnings += 1
        self.code_counts[code] += 1
        if self.code_counts[code] <= self.max_per_code:
            self.diagnostics.append(
                Diagnostic(self.path, line, code, message, sev, col, field, excerpt(text, col=col) if text else "", help)
            )

    def extend(self, diags: Iterable[Diagnostic]) -> None:
        for d in diags:
            self.add(d.line, d.code, d.message, field=d.field, text=d.text, help=d.help, col=d.col, severity=d.severity)

    @property
    def ok(self) -> bool:
        return self._errors == 0

    @property
    def n_errors(self) -> int:
        return self._errors

    @property
    def n_warnings(self) -> int:
        return self._warnings

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.sorted() if d.severity == ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.sorted() if d.severity != ERROR]

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.diagnostics, key=lambda d: (d.line, d.code))

    def omitted(self) -> dict[str, int]:
        """Per code, how many diagnostics were counted but not stored."""
        return {c: n - self.max_per_code for c, n in self.code_counts.items() if n > self.max_per_code}

    def to_dict(self) -> dict:
        def row(d: Diagnostic) -> dict:
            out = {"line": d.line, "code": d.code, "message": d.message}
            for k in ("col", "field", "text", "help"):
                v = getattr(d, k)
                if v:
                    out[k] = v
            return out

        return {
            "ok": self.ok,
            "path": self.path,
            "errors": [row(d) for d in self.errors],
            "warnings": [row(d) for d in self.warnings],
            "counts": dict(self.counts),
            "n_errors": self._errors,
            "n_warnings": self._warnings,
            "by_code": dict(sorted(self.code_counts.items())),
            "omitted": self.omitted(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict) -> "Report":
        rep = cls(path=data.get("path", "<input>"))
        for sev, rows in ((ERROR, data.get("errors", [])), (WARNING, data.get("warnings", []))):
            for r in rows:
                rep.add(
                    r["line"], r["code"], r["message"], field=r.get("field", ""), text=r.get("text", ""),
                    help=r.get("help", ""), col=r.get("col", 0), severity=sev,
                )
        rep.counts = dict(data.get("counts", {}))
        return rep

    def write_text(self, out: TextIO, *, limit: int | None = 50) -> None:
        """Print diagnostics in ruff style followed by a summary line."""
        shown = self.errors + self.warnings
        for d in shown[:limit] if limit else shown:
            out.write(d.format() + "\n")
        if limit and len(shown) > limit:
            out.write(f"... {len(shown) - limit} more stored diagnostics not shown (use --json for all)\n")
        for code, n in self.omitted().items():
            out.write(f"... {n} more {code} ({CODES[code][1]}) not stored\n")
        counts = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        verdict = "ok" if self.ok else "rejected"
        out.write(f"{self.path}: {verdict}: {self._errors} error(s), {self._warnings} warning(s)")
        out.write(f"; {counts}\n" if counts else "\n")
