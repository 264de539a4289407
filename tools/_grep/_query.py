"""One search, compiled once for both engines.

Meaning, whichever engine runs:

* **line mode** (``multiline`` false, the default): the pattern is matched
  against each line on its own; it never matches a newline, ``^``/``$`` (and
  ``\\A``/``\\z``) are the line's start and end.  RE2 gets ``never_nl`` and
  ``(?m)``; ripgrep gets the same by default.
* **multiline mode**: the pattern runs over the whole file; ``.`` also matches
  a newline (``(?s)``), ``^``/``$`` still match at line boundaries
  (``(?m)``), ``\\A``/``\\z`` at the file's start and end.  ripgrep gets
  ``--multiline``.
* ``case_insensitive`` is Unicode simple case folding in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import re2

from tools._grep._syntax import (
    MAX_PATTERN_CHARS,
    line_mode_anchors,
    matches_newline_literally,
    required_literals,
    to_re2,
    to_rust,
    tokenize,
)
from tools._result import ToolFailure

__all__ = ["Query", "compile_query"]

# RE2 program memory; a pattern needing more is refused rather than slowed down.
_RE2_MAX_MEM = 64 << 20


@dataclass(frozen=True)
class Query:
    pattern: str  # as the model gave it
    multiline: bool
    case_insensitive: bool
    re2_pattern: str  # flags applied, line-mode anchors rewritten
    rust_pattern: str  # the same regular language in ripgrep's dialect
    literals: tuple[str, ...] | None  # one of these occurs in every match (None: unknown)
    regex: Any = field(repr=False, compare=False)  # re2._re2.RE2, compiled once
    # One RE2 program per required literal (case folded as the pattern is): the prefilter.
    prefilter: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)


def compile_query(pattern: str, *, multiline: bool, case_insensitive: bool) -> Query:
    """Validate ``pattern`` and compile it; raise a ToolFailure the model can act on."""
    if pattern == "":
        raise ToolFailure("invalid_pattern", "pattern is empty. Give a regular expression (RE2 "
                          "syntax), e.g. 'def main' or 'TODO|FIXME'.")
    if "\x00" in pattern:
        raise ToolFailure("invalid_pattern", "pattern contains a NUL character. Files with NUL "
                          "bytes are binary and are not searched; remove it from the pattern.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolFailure(
            "pattern_too_large",
            f"pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}. Search for "
            "a distinctive part of it, or split an alternation into several searches.",
        )
    tokens = tokenize(pattern)  # refuses PCRE-only constructs by name
    if not multiline:
        if "\n" in pattern or matches_newline_literally(tokens):
            raise ToolFailure(
                "newline_in_pattern",
                "The pattern matches a newline, but grep matches one line at a time unless "
                "multiline is true. Call again with multiline: true, or search for one line.",
            )
        tokens = line_mode_anchors(tokens)
    flags = "(?m" + ("s" if multiline else "") + ("i" if case_insensitive else "") + ")"
    re2_pattern = flags + to_re2(tokens)
    rust_pattern = flags + to_rust(tokens)
    options = re2.Options()
    options.never_capture = True
    options.never_nl = not multiline
    options.max_mem = _RE2_MAX_MEM
    options.log_errors = False
    from re2 import _re2

    regex = _re2.RE2(re2_pattern.encode("utf-8", "surrogatepass"), options)
    if not regex.ok():
        message = regex.error().decode("utf-8", "replace")
        if "too big" in message or "pattern too large" in message:
            raise ToolFailure(
                "pattern_too_large",
                f"The pattern compiles to more than RE2's memory budget ({message}). Large "
                "counted repetitions such as x{1000} multiply its size: search for a shorter "
                "distinctive part instead.",
            )
        raise ToolFailure(
            "invalid_regex",
            f"The pattern is not valid RE2 syntax: {message}. Escape literal metacharacters "
            "with a backslash (e.g. '\\(' or '\\.'), or see the RE2 syntax reference.",
        )
    lits = required_literals(tokens)
    # The prefilter: RE2 searching for one plain literal skips through a buffer with
    # memchr on the literal's first byte (its "prefix accelerator"): 4-5 GB/s, against
    # 1.2 GB/s for bytes.find and 0.5 GB/s for RE2 running an alternation's DFA. So every
    # required literal gets a program of its own, and the pattern itself runs only on a
    # line where one of them was found (stdlib, (TODO|FIXME|XXX) over every file: 35 ms
    # for three literal programs, 113 ms for the alternation; docs/performance.md).
    # Case folding is the pattern's: a (?i) literal program folds as RE2 folds the pattern.
    prefilter = _literal_programs(lits, case_insensitive, options) if lits else None
    literals = tuple(lits) if lits and prefilter is not None else None
    return Query(pattern, multiline, case_insensitive, re2_pattern, rust_pattern, literals, regex,
                 prefilter)


def _literal_programs(lits: list[str], case_insensitive: bool, options: Any) -> tuple[Any, ...] | None:
    """An RE2 program matching exactly each literal (None when one will not compile)."""
    from re2 import _re2

    programs = []
    for lit in lits:
        # \x{...} for everything but letters, digits and '_': no character is special then.
        body = "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"\\x{{{ord(c):x}}}"
                       for c in lit)
        program = _re2.RE2((("(?i)" if case_insensitive else "") + body).encode(
            "utf-8", "surrogatepass"), options)
        if not program.ok():
            return None  # a lone surrogate, say: the pattern alone still finds every match
        programs.append(program)
    return tuple(programs)
