"""JSON text from a file or a request, parsed with every failure a :class:`json.JSONDecodeError`.

:func:`json.loads` raises two more errors on hostile text: :class:`RecursionError` for lists or objects nested
deeper than the interpreter's recursion limit (``[[[[…`` of 40 kB), and a bare :class:`ValueError` for an
integer longer than :func:`sys.get_int_max_str_digits` (4,300 digits).  And it takes the last value of a key an
object names twice, silently (``{"label": 0, "label": 1}``: which did the writer mean?).  Every reader of JSON
files catches ``JSONDecodeError`` and reports the file, line and column; :func:`loads` makes those three such
errors too.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

_DIGITS = re.compile(r"\d+")


class _KeyTwice(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _KeyTwice(k)
            seen.add(k)
    return d


def loads(text: str | bytes) -> Any:
    """:func:`json.loads`, raising :class:`json.JSONDecodeError` for too deep nesting, too long integers and an
    object that names a key twice."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError:
        raise
    except _KeyTwice as exc:
        doc = _str(text)
        at = [m.start() for m in re.finditer(re.escape(json.dumps(exc.key, ensure_ascii=False)) + r"\s*:", doc)]
        raise json.JSONDecodeError(f"key {exc.key!r} twice in one object", doc, at[1] if len(at) > 1 else 0) from None
    except RecursionError:
        raise json.JSONDecodeError("lists or objects nested too deeply", _str(text), 0) from None
    except ValueError as exc:  # int('1' * 5000): the only ValueError json.loads raises besides JSONDecodeError
        doc = _str(text)
        limit = sys.get_int_max_str_digits()
        at = next((m.start() for m in _DIGITS.finditer(doc) if limit and m.end() - m.start() > limit), 0)
        raise json.JSONDecodeError(f"a number with more than {limit:,} digits", doc, at) from exc


def _str(text: str | bytes) -> str:
    return text if isinstance(text, str) else text.decode("utf-8", "replace")
