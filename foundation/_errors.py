"""The foundation package's one error root.

    FoundationError
    ├── FileRefused       a file that may not be read: missing, unreadable, not a
    │   │                 regular file (a FIFO, a device, a directory), over its cap
    │   └── FileMissing   no such file (callers with a default catch this one)
    └── DocumentError     a config-like file that does not parse, or parses but is
                          invalid: every problem, each with its location

Each package that uses these raises its own error from them (``ConfigError``,
``SpecError``...), keeping the message: the message *is* the one format.
:func:`reraised_as` is that rule, written once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["DocumentError", "FileMissing", "FileRefused", "FoundationError", "Problem",
           "reraised_as"]


class FoundationError(Exception):
    """Root of every error the foundation raises on purpose."""


class FileRefused(FoundationError):
    """A file that may not be read (the message names it and why)."""


class FileMissing(FileRefused):
    """The file does not exist."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a document, at ``where`` (``line 3, column 5`` or ``policy.mode``)."""

    where: str
    message: str


class DocumentError(FoundationError):
    """A document that does not parse or does not validate.

    The message is one line per problem, each naming the document and where in it,
    the way a compiler reports (``config /etc/x.json: policy.mode: ...``), then
    ``hint`` (the next step) on a line of its own when there is one.
    """

    def __init__(self, what: str, source: str, problems: Sequence[Problem], hint: str = "") -> None:
        self.what = what
        self.source = source
        self.problems = tuple(problems)
        self.hint = hint
        named = f"{what} {source}" if source else what  # bytes that are no file: a member
        lines = [f"{named}: {p.where}: {p.message}" for p in self.problems]
        super().__init__("\n".join(lines + ([hint] if hint else [])))


@contextmanager
def reraised_as(error: Callable[[str], Exception]) -> Iterator[None]:
    """Inside the block, a :class:`FoundationError` leaves as ``error(its message)``.

    Why: each package has one error root, so its callers catch its errors only,
    while the words (which file, where in it, what next) are foundation's one
    format and must reach the reader unchanged.  The foundation error is not
    chained (``from None``): the message already says all it knew.  Anything
    else, the package's own errors included, passes through untouched, so a
    block may still catch :class:`FileMissing` itself, inside, for a default.
    """
    try:
        yield
    except FoundationError as exc:
        raise error(str(exc)) from None
