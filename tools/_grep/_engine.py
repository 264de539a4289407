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

A file is *binary* when its first 8 KiB hold a NUL byte and it does not start
with a UTF-8 or UTF-16 byte-order mark (:func:`sniff`, the one rule both
engines apply).  Binary files are never reported as matches; the ones that
would have matched are returned in ``ScanResult.binary`` so the tool can say
how many were skipped.  A NUL later in a file does not make it binary: read
shows such a file as text, and so grep searches it (docs/grep.md).

A byte-order mark is read as ``read`` reads it: a UTF-8 BOM is not part of
the first line (``^x`` matches it, and printed lines do not carry U+FEFF), a
UTF-16 file is searched as the text it encodes.  UTF-32 files count as
binary: ripgrep cannot decode them, and both engines must agree.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tools._grep._query import Query

__all__ = ["BINARY_SNIFF_BYTES", "Engine", "MatchLine", "ScanResult", "sniff"]

BINARY_SNIFF_BYTES = 8192
UTF8_BOM = codecs.BOM_UTF8
# The first bytes of the byte-order marks sniff knows (UTF-32 BE starts with a NUL).
_MARK_STARTS = frozenset(m[0] for m in (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE,
                                         codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE))


def sniff(head: bytes | bytearray, n: int | None = None) -> str:
    """What a file's first bytes (``head[:n]``) say it is: ``utf-8-bom``, ``utf-16-le``,
    ``utf-16-be``, ``binary`` or ``text`` (see the module docstring)."""
    n = len(head) if n is None else n
    if n and head[0] not in _MARK_STARTS:  # no byte-order mark can start here: the common case
        return "binary" if head.find(b"\0", 0, min(n, BINARY_SNIFF_BYTES)) >= 0 else "text"
    first = bytes(head[:min(4, n)])
    if first.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "binary"
    if first.startswith(UTF8_BOM):
        return "utf-8-bom"
    if first.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le"
    if first.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be"
    return "binary" if head.find(b"\0", 0, min(n, BINARY_SNIFF_BYTES)) >= 0 else "text"


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
