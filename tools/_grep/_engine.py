"""The interface both search engines implement, and what they hand back.

An engine never decides *which* files to search: the caller gives it the
list (walked once, ignore rules, glob and secret filters applied), so the two
engines can only differ in how they match, and the differential tests check
exactly that.

Two passes, so the tool's cost stays close to "find the matching files":

1. :meth:`Engine.scan` over every candidate: which files match (and, for
   count mode, how many lines).
2. :meth:`Engine.lines` over the few files whose lines will be shown: the
   matching lines themselves.

A file is *binary* when its first 8 KiB hold a NUL byte.  Binary files are
never reported as matches; the ones that would have matched are returned in
``ScanResult.binary`` so the tool can say how many were skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tools._grep._query import Query

__all__ = ["BINARY_SNIFF_BYTES", "Engine", "MatchLine", "ScanResult"]

BINARY_SNIFF_BYTES = 8192


@dataclass
class ScanResult:
    """Pass one.  ``counts`` maps each matching text file to its matching-line count
    (1 when only files were asked for)."""

    counts: dict[str, int] = field(default_factory=dict)
    binary: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MatchLine:
    number: int  # 1-based
    text: bytes  # without its line terminator


class Engine(Protocol):
    """A way to run a :class:`Query` over a list of absolute file paths."""

    name: str

    def scan(self, files: Sequence[str], query: Query, *, count: bool) -> ScanResult:
        """Which of ``files`` match; with ``count``, how many lines match in each."""
        ...

    def lines(self, files: Sequence[str], query: Query, *, max_lines: int) -> dict[str, list[MatchLine]]:
        """Up to ``max_lines`` matching lines of each file (text files only), in file order."""
        ...
