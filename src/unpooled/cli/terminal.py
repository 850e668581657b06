"""What the command line prints reaches a terminal: a control or invisible character that came from data (a team
name, a run id, a description) is printed as an escape, never sent as is -- a run id holding ``ESC [ 2 J`` could
otherwise clear or forge rows of an organiser's screen (security review N10).  Line feeds and tabs pass; bytes
written to ``sys.stdout.buffer`` (a zip, a KB) are not text and pass untouched."""

from __future__ import annotations

import contextlib
import re
import sys

_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")


def _escape(m: re.Match) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def printable(text: str) -> str:
    """``text`` with every control and invisible formatting character written as an escape (``\\u001b``,
    ``\\u202e``): JSON's own, so JSON printed stays JSON that reads back the same (``json.dumps`` escapes
    U+0000-U+001F itself; the others escaped here can only stand inside its strings)."""
    return _HIDDEN.sub(_escape, text)


class _Escaping:
    """A text stream that escapes what :func:`printable` escapes, and is otherwise the stream it wraps."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def escaped_stdout():
    """Within the block, ``sys.stdout`` escapes control and invisible characters."""
    before = sys.stdout
    sys.stdout = _Escaping(before)
    try:
        yield
    finally:
        sys.stdout = before
