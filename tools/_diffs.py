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

    Every diff line ends with a newline: difflib leaves a last line without one as it
    is, so a snippet that stops mid-file (an edit's context) ran its ``-`` line into
    the ``+`` line after it (``-    return x+    return y``, seen in the TUI).
    """
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 old_name, new_name)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def new_file_diff(path: str, text: str) -> str:
    """What creating ``path`` with ``text`` adds: every line, against /dev/null, bounded."""
    return bound_diff(text_diff("", text, "/dev/null", path))
