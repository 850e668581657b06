"""Exception types of the pure core."""

from __future__ import annotations


class UnpooledError(Exception):
    """Base class of every error unpooled raises on purpose."""


class InvalidInputError(UnpooledError, ValueError):
    """A function argument is outside what the function accepts.

    The message names the parameter, what it accepts and what it received.
    """


class LocatedError(UnpooledError):
    """An input file is wrong at a known place (``path:line``)."""

    def __init__(self, path: str, line: int, message: str, *, field: str = "") -> None:
        self.path, self.line, self.field, self.detail = str(path), line, field, message
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}" + (f" [{field}]" if field else ""))


class SchemaError(LocatedError):
    """A relation schema file is invalid."""


class CorpusError(LocatedError):
    """A corpus source file is invalid."""


def file_problem(path) -> str:
    """Why ``path`` is not a file to read: ``"no such file"``, ``"a folder, not a file"``, or ``""`` (it is one)."""
    from pathlib import Path

    p = Path(path)
    if p.is_file():
        return ""
    return "a folder, not a file" if p.is_dir() else "no such file"


def check_choice(name: str, value, options) -> None:
    """Raise :class:`InvalidInputError` ``"name: expected one of a, b, c, got 'x'"`` unless ``value`` is one of
    ``options`` (the one check behind every choice of a name registry, :mod:`unpooled.core.names`)."""
    if value not in options:
        raise InvalidInputError(f"{name}: expected one of {', '.join(map(str, options))}, got {value!r}")
