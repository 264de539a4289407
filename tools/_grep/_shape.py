"""Turning engine results into the text the model reads.

Shared by both engines, so the output format cannot drift between them.
Order: files sorted by absolute path (code-point order), lines by number.

Content mode prints ``path:12:text`` for a matching line and ``path-13-text``
for a context line (the grep/ripgrep convention), with ``--`` between
non-adjacent groups.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tools._grep._engine import MatchLine

__all__ = [
    "MAX_FILES",
    "MAX_LINE_CHARS",
    "MAX_MATCH_LINES",
    "MAX_LINES_PER_FILE",
    "content_block",
    "no_matches",
    "show_line",
]

MAX_MATCH_LINES = 100
MAX_LINES_PER_FILE = 50
MAX_FILES = 1000
MAX_LINE_CHARS = 500


def no_matches(pattern: str) -> str:
    return f"[no matches: {pattern}]"


def show_line(raw: bytes) -> str:
    """A line as printed: invalid UTF-8 becomes U+FFFD, long lines are cut."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    text = raw.decode("utf-8", "replace")
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + f"... [line truncated: {len(text)} characters]"
    return text


def content_block(path: str, matches: Sequence[MatchLine], context: int,
                  max_lines: int | None = None) -> tuple[list[str], int]:
    """Output lines for one file: its matching lines and ``context`` lines around each.

    At most ``max_lines`` lines are printed, context lines counted (a match
    whose context would pass the cap is left for the next call, except the
    first, which is always shown); returns the lines and how many matches they show.
    """
    if context <= 0:
        taken = list(matches) if max_lines is None else list(matches[:max(1, max_lines)])
        return [f"{path}:{m.number}:{show_line(m.text)}" for m in taken], len(taken)
    wanted: set[int] = set()
    used = 0
    for m in matches:
        more = set(range(max(1, m.number - context), m.number + context + 1))
        if max_lines is not None and used and len(wanted | more) > max_lines:
            break
        wanted |= more
        used += 1
    matched = {m.number: m.text for m in matches[:used]}
    around = _read_lines(path, wanted - matched.keys())
    out: list[str] = []
    previous = 0
    for number in sorted(wanted):
        if number in matched:
            text = matched[number]
            sep = ":"
        elif number in around:
            text = around[number]
            sep = "-"
        else:
            continue  # past the end of the file
        if previous and number != previous + 1:
            out.append("--")
        out.append(f"{path}{sep}{number}{sep}{show_line(text)}")
        previous = number
    return out, used


def _read_lines(path: str, numbers: set[int]) -> dict[int, bytes]:
    if not numbers:
        return {}
    last = max(numbers)
    found: dict[int, bytes] = {}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            for number, line in enumerate(fh, 1):
                if number in numbers:
                    found[number] = line[:-1] if line.endswith(b"\n") else line
                if number >= last:
                    break
    except OSError:
        pass
    return found
