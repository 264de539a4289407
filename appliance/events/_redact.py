"""Redaction before anything is durable: every string of every event, in one place.

Two sources of rules:

- ``events.redact`` in config.json: regular expressions the operator wants
  out of the record (e.g. ``AKIA[A-Z0-9]{16}``), replaced by ``[redacted]``
  everywhere: arguments, results, details (an edit's diff), error text,
  the model's own text.
- what a redacting extension did: when an extension rewrites a result's
  ``content`` (the specification's ``gsub("AKIA…"; "[redacted]")``), the
  passages it replaced are learned and replaced the same way in every other
  field of that result and of every later event of this process.

The store applies the redactor to each event before it is serialised, so
``events.db``, its WAL, what listeners (the rpc stream, the TUI) are handed
and every export hold the redacted text only.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Iterable
from typing import Any, TypeVar

__all__ = ["REDACTED", "Redactor"]

REDACTED = "[redacted]"
_MIN_LEARNED = 8  # shorter replaced passages are edits, not secrets: learning them would garble the log
_MAX_LEARNED = 4096
_MAX_RULES = 1000

T = TypeVar("T")


class Redactor:
    """Configured patterns plus learned literal passages; thread-safe."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self._patterns = [re.compile(p) for p in patterns]
        self._learned: dict[str, str] = {}
        self._lock = threading.Lock()
        self._combined: re.Pattern[str] | None = None

    def __bool__(self) -> bool:
        return bool(self._patterns or self._learned)

    def learn(self, before: str, after: str) -> None:
        """Learn what a rewrite of ``before`` into ``after`` took out (replaced or deleted passages)."""
        if before == after or len(before) > (8 << 20):
            return
        with self._lock:
            for i1, i2, j1, j2 in _changes(before, after):
                gone = before[i1:i2]
                if _MIN_LEARNED <= len(gone) <= _MAX_LEARNED and gone.strip() \
                        and len(self._learned) < _MAX_RULES:
                    self._learned[gone] = after[j1:j2] or REDACTED
            self._combined = None

    def text(self, value: str) -> str:
        for pattern in self._patterns:
            value = pattern.sub(REDACTED, value)
        with self._lock:
            if self._learned and self._combined is None:
                keys = sorted(self._learned, key=len, reverse=True)
                self._combined = re.compile("|".join(re.escape(k) for k in keys))
            combined, learned = self._combined, dict(self._learned)
        if combined is not None:
            value = combined.sub(lambda m: learned[m.group(0)], value)
        return value

    def value(self, value: T) -> T:
        """``value`` with every string in it (keys too) redacted; other types as they are."""
        return _walk(value, self.text)  # type: ignore[no-any-return]


def _changes(before: str, after: str) -> list[tuple[int, int, int, int]]:
    """Changed spans, with equal runs shorter than 4 characters folded into the change.

    Without the folding, ``AKIA…`` → ``[redacted]`` could split on a letter
    the two happen to share and be learned as fragments.
    """
    spans: list[list[int]] = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    pending: list[int] | None = None
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal" and (i2 - i1 >= 4 or pending is None):
            if pending is not None:
                spans.append(pending)
                pending = None
            continue
        if pending is None:
            pending = [i1, i2, j1, j2]
        else:
            pending[1], pending[3] = i2, j2
    if pending is not None:
        spans.append(pending)
    return [(a, b, c, d) for a, b, c, d in spans]


def _walk(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {(_walk(k, fn) if isinstance(k, str) else k): _walk(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, fn) for v in value)
    return value
