"""Unified diffs for approvals, results and the audit log, bounded the one way.

write and edit both show what a call changes (before asking and after
running); the cap and the note that says the diff was cut live here once.
"""

from __future__ import annotations

import difflib

__all__ = ["DIFF_MAX_CHARS", "bound_diff", "new_file_diff", "text_diff"]

#: A diff longer than this is cut with a note: an approval shows the start, the file the rest.
DIFF_MAX_CHARS = 64 * 1024


def bound_diff(diff: str) -> str:
    """``diff`` cut at :data:`DIFF_MAX_CHARS`, saying so."""
    return diff if len(diff) <= DIFF_MAX_CHARS else diff[:DIFF_MAX_CHARS] + "\n[diff truncated]\n"


def text_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """The unified diff from ``old`` to ``new`` (unbounded: callers join hunks, then bound).

    Every line of it ends in a newline: a last line without one (a file's, or an edit's
    snippet, which stops at the end of its last line) would run into the next line of the
    diff (``-beta+gamma``), and a reader could not tell the removed line from the added.
    """
    return "".join(line if line.endswith("\n") else line + "\n"
                   for line in difflib.unified_diff(old.splitlines(keepends=True),
                                                    new.splitlines(keepends=True), old_name,
                                                    new_name))


def new_file_diff(path: str, text: str) -> str:
    """What creating ``path`` with ``text`` adds: every line, against /dev/null, bounded."""
    return bound_diff(text_diff("", text, "/dev/null", path))
