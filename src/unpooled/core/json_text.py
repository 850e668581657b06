"""JSON text from a file or a request, parsed with every failure a :class:`json.JSONDecodeError`.

:func:`json.loads` raises two more errors on hostile text: :class:`RecursionError` for lists or objects nested
deeper than the interpreter's recursion limit (``[[[[…`` of 40 kB), and a bare :class:`ValueError` for an
integer longer than :func:`sys.get_int_max_str_digits` (4,300 digits).  Every reader of JSON files catches
``JSONDecodeError`` and reports the file, line and column; :func:`loads` makes those two such errors too.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

_DIGITS = re.compile(r"\d+")


def loads(text: str | bytes) -> Any:
    """:func:`json.loads`, raising :class:`json.JSONDecodeError` for too deep nesting and too long integers."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("lists or objects nested too deeply", _str(text), 0) from None
    except ValueError as exc:  # int('1' * 5000): the only ValueError json.loads raises besides JSONDecodeError
        doc = _str(text)
        limit = sys.get_int_max_str_digits()
        at = next((m.start() for m in _DIGITS.finditer(doc) if limit and m.end() - m.start() > limit), 0)
        raise json.JSONDecodeError(f"a number with more than {limit:,} digits", doc, at) from exc


def _str(text: str | bytes) -> str:
    return text if isinstance(text, str) else text.decode("utf-8", "replace")
