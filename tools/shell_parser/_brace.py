"""Brace expansion, as bash does it before anything else: ``r{m,} -{r,f}`` is ``rm r -r -f``.

A hostile command can spell a program or an option through braces
(``{rm,-rf,/}`` is the three words ``rm -rf /``), so policy expands them the
way the shell will before it judges the words.  Only unquoted braces expand.
"""

from __future__ import annotations

import re

from tools.shell_parser._lexer import Unreadable
from tools.shell_parser._model import MAX_BRACE_WORDS, Word

_INT_SEQ = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$")
_CHAR_SEQ = re.compile(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?$")


def brace_expand(word: Word) -> list[Word]:
    """The words ``word`` becomes; raises :class:`Unreadable` past :data:`MAX_BRACE_WORDS`."""
    if "{" not in word.text:
        return [word]
    out: list[Word] = []
    work = [word]
    while work:
        w = work.pop(0)
        parts = _expand_one(w)
        if parts is None:
            out.append(w)
        else:
            work[0:0] = parts
        if len(out) + len(work) > MAX_BRACE_WORDS:
            raise Unreadable(f"a brace expansion in {word.raw[:60]!r} makes more than "
                             f"{MAX_BRACE_WORDS} words")
    return out


def _expand_one(w: Word) -> list[Word] | None:
    t, m = w.text, w.mask
    for start, c in enumerate(t):
        if c != "{" or m[start] != "u":
            continue
        depth = 0
        commas: list[int] = []
        end = -1
        for j in range(start, len(t)):
            if m[j] != "u":
                continue
            if t[j] == "{":
                depth += 1
            elif t[j] == "}":
                depth -= 1
                if depth == 0:
                    end = j
                    break
            elif t[j] == "," and depth == 1:
                commas.append(j)
        if end < 0:
            return None  # no closing brace: nothing after this can expand either
        pre, pre_m = t[:start], m[:start]
        post, post_m = t[end + 1:], m[end + 1:]
        if commas:
            bounds = [start, *commas, end]
            return [Word(pre + t[a + 1:b] + post, w.raw, pre_m + m[a + 1:b] + post_m, w.quoted,
                         w.procsub) for a, b in zip(bounds, bounds[1:], strict=False)]
        inner = t[start + 1:end]
        if "u" * len(inner) == m[start + 1:end]:
            items = _sequence(inner)
            if items is not None:
                return [Word(pre + x + post, w.raw, pre_m + "u" * len(x) + post_m, w.quoted,
                             w.procsub) for x in items]
    return None


def _sequence(inner: str) -> list[str] | None:
    m = _INT_SEQ.match(inner)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        if abs(b - a) // step + 1 > MAX_BRACE_WORDS:
            raise Unreadable(f"the sequence {{{inner}}} makes more than {MAX_BRACE_WORDS} words")
        width = max(len(m.group(1)), len(m.group(2))) if (
            m.group(1).lstrip("-").startswith("0") or m.group(2).lstrip("-").startswith("0")) else 0
        rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(n).zfill(width) if width else str(n) for n in rng]
    m = _CHAR_SEQ.match(inner)
    if m:
        a, b = ord(m.group(1)), ord(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [chr(n) for n in rng]
    return None
