"""JSON text from a file or a request, parsed with every failure a :class:`json.JSONDecodeError`.

:func:`json.loads` raises two more errors on hostile text: :class:`RecursionError` for lists or objects nested
deeper than the interpreter's recursion limit (``[[[[…`` of 40 kB), and a bare :class:`ValueError` for an
integer longer than :func:`sys.get_int_max_str_digits` (4,300 digits); bytes that are not UTF-8 raise a
:class:`UnicodeDecodeError`; and it takes the last value of a key an object names twice, silently (``{"label": 0,
"label": 1}``: which did the writer mean?  A proxy reading the first value of a request body sees another request
than the one acted on).  Every reader of JSON files and request bodies catches ``JSONDecodeError`` and reports the
file, line and column; :func:`loads` makes those four such errors too.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

_DIGITS = re.compile(r"\d+")


class _KeyTwice(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _KeyTwice(k)
        out[k] = v
    return out


def loads(text: str | bytes) -> Any:
    """:func:`json.loads`, raising :class:`json.JSONDecodeError` for too deep nesting, too long integers, bytes that
    are not UTF-8 and a key given twice in one object."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("lists or objects nested too deeply", _str(text), 0) from None
    except UnicodeDecodeError as exc:
        raise json.JSONDecodeError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", _str(text),
                                   len(exc.object[:exc.start].decode("utf-8", "replace"))) from None
    except _KeyTwice as exc:
        doc = _str(text)
        at = [m.start() for m in re.finditer(re.escape(json.dumps(exc.key, ensure_ascii=False)) + r"\s*:", doc)]
        raise json.JSONDecodeError(f"the key {exc.key!r} is given twice in one object", doc,
                                   at[1] if len(at) > 1 else 0) from None
    except ValueError as exc:  # int('1' * 5000): the only ValueError json.loads raises besides JSONDecodeError
        doc = _str(text)
        limit = sys.get_int_max_str_digits()
        at = next((m.start() for m in _DIGITS.finditer(doc) if limit and m.end() - m.start() > limit), 0)
        raise json.JSONDecodeError(f"a number with more than {limit:,} digits", doc, at) from exc


def finite(obj: Any) -> Any:
    """``obj`` (dicts, lists, numbers) with every float that is not finite as None, recursively: JSON has no NaN nor
    Infinity (a database's JSON check refuses them, strict parsers too), and an undefined figure reads ``null``."""
    if isinstance(obj, float):  # numpy's float64 too (a float subclass); other numpy floats below
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if type(obj).__module__ == "numpy" and hasattr(obj, "is_integer"):  # float32, float16: as Python floats
        return finite(float(obj))
    return obj


def _str(text: str | bytes) -> str:
    return text if isinstance(text, str) else text.decode("utf-8", "replace")
