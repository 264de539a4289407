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
- what was learned in an earlier process of the same session: a learned
  passage is remembered beside the log as a salted SHA-256 with its length
  and the kinds of characters it has (never the passage itself), so a later
  process recognises it again, in its events and in the preimages it would
  keep (a preimage holding one is not kept).  To find it, the text is cut
  into runs of those kinds of characters (a regular expression) and only
  windows of the right length inside them are hashed.

The store applies the redactor to each event before it is serialised, so
``events.db``, its WAL, what listeners (the rpc stream, the TUI) are handed
and every export hold the redacted text only.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["REDACTED", "Redactor", "passage_record"]

REDACTED = "[redacted]"
_MIN_LEARNED = 8  # shorter replaced passages are edits, not secrets: learning them would garble the log
_MAX_LEARNED = 4096
_MAX_RULES = 1000
#: Windows hashed for one text at most; past it the text is taken to hold a secret (fail closed).
_MAX_WINDOWS = 4_000_000
_SPACE = " \t\n\r\f\v"
_CLASS = {"l": "a-z", "u": "A-Z", "d": "0-9", "s": " \\t\\n\\r\\f\\v"}  # "o": anything else

T = TypeVar("T")
Persist = Callable[[str, list[str]], None]


def _kinds(text: str) -> str:
    """Which kinds of characters ``text`` has: l(ower) u(pper) d(igit) s(pace) o(ther)."""
    found = set()
    for ch in text:
        found.add("l" if "a" <= ch <= "z" else "u" if "A" <= ch <= "Z" else
                  "d" if "0" <= ch <= "9" else "s" if ch in _SPACE else "o")
    return "".join(k for k in "ludso" if k in found)


def _run_pattern(kinds: str, length: int) -> re.Pattern[str]:
    """Runs of at least ``length`` characters, every one of them of the ``kinds``."""
    if "o" in kinds:  # "other" is what is left: say which kinds are *not* in the run
        left_out = "".join(_CLASS[k] for k in "luds" if k not in kinds)
        body = f"[^{left_out}]" if left_out else r"[\s\S]"
    else:
        body = "[" + "".join(_CLASS[k] for k in kinds) + "]"
    return re.compile(f"{body}{{{length},}}")


def _digest(salt: str, passage: str) -> str:
    return hashlib.sha256((salt + passage).encode("utf-8", "surrogatepass")).hexdigest()


def passage_record(salt: str, passage: str) -> dict[str, Any]:
    """What is remembered of a learned passage: enough to recognise it, never to recover it."""
    return {"length": len(passage), "kinds": _kinds(passage), "sha256": _digest(salt, passage)}


class Redactor:
    """Configured patterns plus learned literal passages; thread-safe."""

    def __init__(self, patterns: Iterable[str] = (), *, persist: Persist | None = None) -> None:
        self._patterns = [re.compile(p) for p in patterns]
        self._learned: dict[str, str] = {}
        self._lock = threading.Lock()
        self._combined: re.Pattern[str] | None = None
        # (salt, length, kinds) -> digests of passages learned by an earlier process
        self._remembered: dict[tuple[str, int, str], set[str]] = {}
        self._persist = persist  # (session id, new passages): remember them for later processes

    def __bool__(self) -> bool:
        return bool(self._patterns or self._learned or self._remembered)

    def learn(self, before: str, after: str, *, session: str | None = None) -> list[str]:
        """Learn what a rewrite of ``before`` into ``after`` took out (replaced or deleted passages).

        ``session``: the session it happened in, so later processes of it
        are bound by it too.  Returns the passages newly learned.
        """
        if before == after or len(before) > (8 << 20):
            return []
        new: list[str] = []
        with self._lock:
            for i1, i2, j1, j2 in _changes(before, after):
                gone = before[i1:i2]
                if _MIN_LEARNED <= len(gone) <= _MAX_LEARNED and gone.strip() \
                        and len(self._learned) < _MAX_RULES and gone not in self._learned:
                    self._learned[gone] = after[j1:j2] or REDACTED
                    new.append(gone)
            self._combined = None
        if new and session is not None and self._persist is not None:
            self._persist(session, new)
        return new

    def remember(self, salt: str, records: Iterable[dict[str, Any]]) -> None:
        """Take on what an earlier process learned (records from :func:`passage_record`)."""
        with self._lock:
            for r in records:
                try:
                    key = (salt, int(r["length"]), str(r["kinds"]))
                    digest = str(r["sha256"])
                except (KeyError, TypeError, ValueError):
                    continue  # a damaged record: the rest still bind
                if key[1] >= _MIN_LEARNED and key[2] and set(key[2]) <= set("ludso"):
                    self._remembered.setdefault(key, set()).add(digest)

    def text(self, value: str) -> str:
        for pattern in self._patterns:
            value = pattern.sub(REDACTED, value)
        with self._lock:
            if self._learned and self._combined is None:
                keys = sorted(self._learned, key=len, reverse=True)
                self._combined = re.compile("|".join(re.escape(k) for k in keys))
            combined, learned = self._combined, dict(self._learned)
            remembered = {k: set(v) for k, v in self._remembered.items()}
        if combined is not None:
            value = combined.sub(lambda m: learned[m.group(0)], value)
        if remembered:
            value = _redact_remembered(value, remembered)
        return value

    def value(self, value: T) -> T:
        """``value`` with every string in it (keys too) redacted; other types as they are."""
        return _walk(value, self.text)  # type: ignore[no-any-return]


def _redact_remembered(value: str, remembered: dict[tuple[str, int, str], set[str]]) -> str:
    """``value`` with every window whose digest was remembered replaced by ``[redacted]``."""
    spans: list[tuple[int, int]] = []
    budget = _MAX_WINDOWS
    for (salt, length, kinds), digests in remembered.items():
        if len(value) < length:
            continue
        for run in _run_pattern(kinds, length).finditer(value):
            start, end = run.span()
            budget -= end - start - length + 1
            if budget < 0:  # too much to check: fail closed rather than let a secret through
                return REDACTED + " (too large to check against what redaction learned)"
            i = start
            while i + length <= end:
                if _digest(salt, value[i:i + length]) in digests:
                    spans.append((i, i + length))
                    i += length
                else:
                    i += 1
    if not spans:
        return value
    out: list[str] = []
    pos = 0
    for a, b in sorted(spans):
        if a < pos:
            continue
        out.append(value[pos:a] + REDACTED)
        pos = b
    return "".join(out) + value[pos:]


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
