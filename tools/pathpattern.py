"""The one glob dialect: what a path pattern means, wherever Abhed reads one.

The glob tool's ``pattern``, grep's ``glob`` filter, ``tools.secret_paths``,
``tools.ignore`` and the policy's ``path`` rules all go through this module,
so a pattern means the same thing everywhere (docs/tools.md, "Path
patterns").  The dialect is **gitignore's**, plus braces:

- a pattern with no ``/`` except a trailing one matches a name at any depth
  (``*.pem`` is ``**/*.pem``); one with a ``/`` is anchored at the base (the
  workspace root for config, the searched directory for glob and grep); a
  leading ``./`` anchors a bare name (so does a leading ``/`` in the config
  lists, as in .gitignore; in the glob tool and policy rules a leading ``/``
  starts an absolute path);
- a match on a directory covers everything beneath it; a trailing ``/``
  matches directories only (``.ssh/``);
- ``*`` and ``?`` stay within one path segment (dot-files included), ``**``
  crosses segments, ``[abc]``, ``[a-z]``, ``[!a]`` are character classes
  (never matching ``/``), ``\\`` escapes;
- ``{a,b}`` and ``{1..3}`` expand as in bash (git has no braces, and models
  and operators write them);
- ``!`` in front negates: in a list the last matching pattern wins, so
  ``!.env.example`` after ``.env.*`` re-allows; a single pattern with ``!``
  matches what the rest does not.

Why gitignore and not a shell glob: two of the consumers (``tools.ignore``
and every ``.gitignore`` the walker reads) must follow git's rules anyway,
operators already know them, and "``*.pem`` anywhere" is the safe reading
for a secret or a deny rule.  Why pathspec: it is the well-kept
implementation of exactly these rules that the walker already uses for
``.gitignore``; bracex (by wcmatch's author) adds the braces.  A third
hand-written translator is how the three dialects this replaces came to
disagree (``conf/[ab].env`` matched in the glob tool, nothing in policy).

A pattern this module cannot read raises :class:`PatternError` naming the
problem, and config validation turns that into a refusal at load time: a
pattern is never silently inert.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import bracex
from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from tools._result import ToolFailure

__all__ = ["PathPattern", "PathRules", "PatternError", "check_patterns", "escape", "gitignore_spec"]

MAX_PATTERN_CHARS = 4096  # no path is longer, so neither is a useful pattern
MAX_EXPANSIONS = 256  # braces of one pattern; more is a typo or an attack, not a rule


class PatternError(ToolFailure):
    """A path pattern the dialect cannot read; the message says what to change."""

    def __init__(self, pattern: str, problem: str) -> None:
        shown = pattern if len(pattern) <= 120 else pattern[:117] + "..."
        super().__init__("invalid_pattern", f"Pattern {shown!r} {problem}.")
        self.pattern = pattern
        self.problem = problem


def escape(text: str) -> str:
    """``text`` as a pattern matching only itself (anchored when it holds a ``/``)."""
    out = re.sub(r"([*?\[\]{}\\!#])", r"\\\1", text)
    return out.replace(" ", "\\ ") if out.endswith(" ") else out


def _braces_balanced(pattern: str) -> str | None:
    depth = 0
    i = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]" or pattern[i - 1] in "[!^"
        elif c == "[":
            in_class = pattern.find("]", i + 2) != -1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return "has a '}' with no '{' before it (write '\\}' for a literal brace)"
        i += 1
    if depth:
        return "has a '{' that is never closed (write '\\{' for a literal brace)"
    return None


def _class_body(inner: str, pattern: str) -> str:
    """A glob class body as a regex class body: single characters and a-b ranges.

    Every character is escaped, so nothing Python's re gives meaning inside a
    class ("[" nesting, "--", "&&", "~~", "||" set operations, "^") survives;
    a reversed range is refused instead of failing inside re.
    """
    out: list[str] = []
    i = 0
    while i < len(inner):
        first = inner[i]
        if i + 2 < len(inner) and inner[i + 1] == "-":
            last = inner[i + 2]
            if ord(last) < ord(first):
                raise PatternError(pattern, f"has the range {first}-{last}, which runs backwards "
                                   "(write ranges low to high, e.g. [a-z])")
            out.append(re.escape(first) + "-" + re.escape(last))
            i += 3
        else:
            out.append(re.escape(first))
            i += 1
    return "".join(out)


def _segment_regex(seg: str, pattern: str) -> str:
    """One '/'-free segment (braces already expanded) as a regex."""
    res: list[str] = []
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1
            res.append("[^/]*")
        elif c == "?":
            res.append("[^/]")
        elif c == "[":
            # As in git and fnmatch: a "]" right after "[" or "[!" is a member,
            # not the end of the class ("[]]" matches "]").  An unclosed "[" is
            # a literal, as in the shell.
            k = i + 1
            if k < len(seg) and seg[k] in "!^":
                k += 1
            if k < len(seg) and seg[k] == "]":
                k += 1
            j = seg.find("]", k)
            if j == -1:
                res.append(re.escape(c))
            else:
                inner = seg[i + 1 : j]
                negate = inner[:1] in ("!", "^")
                if negate:
                    inner = inner[1:]
                # A class never matches the separator, negated or not.
                res.append(("[^/" if negate else "[") + _class_body(inner, pattern) + "]")
                i = j
        elif c == "\\":
            if i + 1 == len(seg):
                raise PatternError(pattern, "ends with a lone backslash (write two for a "
                                   "literal one)")
            i += 1
            res.append(re.escape(seg[i]))
        else:
            res.append(re.escape(c))
        i += 1
    return "".join(res)


class _GitPattern(GitIgnoreSpecPattern):
    """pathspec's gitignore pattern with a stricter translation of one segment.

    pathspec decides git's structure (anchoring, ``**``, directories,
    negation) and hands each segment to ``_translate_segment_glob``, which
    passes a bracket expression to ``re`` verbatim: ``[!x]`` then matches
    ``/`` and ``[a&&b]`` is a set intersection (a warning, an error under
    ``-W error``).  This override escapes class members and keeps classes
    off the separator; tests/tools/test_pathpattern.py holds pathspec to
    calling it.
    """

    source = ""  # the pattern as written, for error messages (set just before translating)

    def __init__(self, pattern: Any, include: bool | None = None) -> None:
        super().__init__(_inside_only(pattern) if isinstance(pattern, str) else pattern, include)

    @staticmethod
    def _translate_segment_glob(pattern: str, range_error: object) -> str:
        return _segment_regex(pattern, _GitPattern.source)


def _inside_only(line: str) -> str:
    """A trailing ``/**`` means "everything inside", as git reads it: never the directory itself.

    pathspec turns ``vendor/**`` into ``^vendor/``, which also matches the
    directory ``vendor/``; a walker that asks about the directory then skips
    it whole, and ``!vendor/manifest`` can never re-include the file (git and
    ripgrep do re-include it).  ``vendor/*`` means the same for every path
    beneath (a matched child directory covers its own subtree) and does not
    match ``vendor/`` itself; likewise ``vendor/**/`` becomes ``vendor/*/``.
    """
    body = line.rstrip(" ") if not line.endswith("\\ ") else line
    for tail, short in (("/**/", "/*/"), ("/**", "/*")):
        if body.endswith(tail) and not body.endswith("\\" + tail):
            return body[: -len(tail)] + short
    return line


def gitignore_spec(lines: Iterable[str], *, backend: str | None = None) -> GitIgnoreSpec:
    """A ``.gitignore`` (or ``.ignore``, ``.rgignore``) file's lines as one spec, git's way.

    The same translation as every other pattern here (no braces: ignore files
    have none), so the walker's ignore files and the operator's lists cannot
    drift apart.  A line git would skip (a lone ``!``, a trailing backslash)
    raises ``ValueError``; the walker drops such lines.
    """
    patterns: list[GitIgnoreSpecPattern] = []
    for line in lines:
        _GitPattern.source = line
        try:
            patterns.append(_GitPattern(line))
        except re.error as exc:
            raise ValueError(f"{line!r}: {exc.msg}") from None
        except PatternError as exc:
            raise ValueError(exc.message) from None
    return GitIgnoreSpec(patterns, backend=backend)


def _lines(pattern: str, *, negated: bool) -> list[GitIgnoreSpecPattern]:
    """pathspec patterns for one of ours: one per brace expansion."""
    body = pattern[1:] if negated else pattern
    if not body.strip():
        raise PatternError(pattern, "has nothing after '!'")
    if body.startswith("./"):
        body = "/" + body[2:]  # anchors, where a leading '/' means an absolute path
    problem = _braces_balanced(body)
    if problem:
        raise PatternError(pattern, problem)
    try:
        expansions = bracex.expand(body, keep_escapes=True, limit=MAX_EXPANSIONS)
    except bracex.ExpansionLimitException:
        raise PatternError(pattern, f"expands to more than {MAX_EXPANSIONS} patterns through its "
                           "braces; split it or use '*'") from None
    out: list[GitIgnoreSpecPattern] = []
    for expanded in expansions:
        if expanded.startswith(("#", "!")):
            expanded = "\\" + expanded  # a name starting with '#' or '!': not a comment
        _GitPattern.source = pattern
        try:
            line = _GitPattern(("!" if negated else "") + expanded)
        except PatternError:
            raise
        except re.error as exc:
            raise PatternError(pattern, f"could not be translated ({exc.msg})") from None
        except ValueError as exc:  # pathspec's GitIgnorePatternError
            raise PatternError(pattern, f"is not a valid pattern ({exc})") from None
        if line.regex is None:
            raise PatternError(pattern, "matches no path")
        out.append(line)
    return out


def _checked(pattern: str) -> tuple[str, bool]:
    """``pattern`` refused when it is not a usable string; returns it and whether it negates."""
    if not isinstance(pattern, str):
        raise PatternError(repr(pattern), "is not a string")
    if not pattern.strip():
        raise PatternError(pattern, "is empty")
    if "\x00" in pattern:
        raise PatternError(pattern, "holds a NUL byte, which no path can")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(pattern, f"is {len(pattern)} characters long; patterns are limited to "
                           f"{MAX_PATTERN_CHARS}")
    return pattern, pattern.startswith("!")


def _subject(path: str, is_dir: bool) -> str:
    path = path.strip("/")
    return path + "/" if is_dir and path else path


class PathPattern:
    """One pattern, matched against '/'-separated paths relative to its base.

    A leading ``!`` inverts it.  Raises :class:`PatternError` when unreadable.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern, self.negated = _checked(pattern)
        lines = _lines(pattern[1:] if self.negated else pattern, negated=False)
        self._rx = _any_of([line.regex.pattern for line in lines if line.regex is not None])

    @property
    def anchored(self) -> bool:
        """Whether the pattern matches from the base only (it holds a non-trailing '/')."""
        body = self.pattern[1:] if self.negated else self.pattern
        return body.startswith("./") or "/" in body.rstrip("/")

    def match(self, path: str, *, is_dir: bool = False) -> bool:
        hit = self._rx is not None and self._rx.search(_subject(path, is_dir)) is not None
        return hit != self.negated


class PathRules:
    """An ordered list of patterns, gitignore-style: the last one that matches decides.

    Blank lines and lines starting with ``#`` are skipped; ``!pattern``
    re-includes what an earlier pattern matched.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        lines: list[GitIgnoreSpecPattern] = []
        sources: list[str] = []
        kept: list[str] = []
        for raw in patterns:
            text = raw.strip() if isinstance(raw, str) else raw
            if isinstance(text, str) and (not text or text.startswith("#")):
                continue
            text, negated = _checked(text)
            expanded = _lines(text, negated=negated)
            lines.extend(expanded)
            sources.extend([text] * len(expanded))
            kept.append(text)
        self.patterns: tuple[str, ...] = tuple(kept)
        self._sources = sources
        # One spec for the whole list: pathspec finds the last match.  Python's re,
        # not RE2: paths may hold surrogate escapes (names that are not UTF-8),
        # which RE2 cannot encode.
        self._spec = GitIgnoreSpec(lines, backend="simple")
        self._maybe = _any_of([line.regex.pattern for line in lines
                               if line.include and line.regex is not None])

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def match(self, path: str, *, is_dir: bool = False) -> str | None:
        """The pattern that makes ``path`` match (as written), or ``None``.

        ``None`` also when the last matching pattern is a negation.
        """
        subject = _subject(path, is_dir)
        if self._maybe is None or not self._maybe.search(subject):
            return None  # no pattern but a negation could match: the fast common case
        result = self._spec.check_file(subject)
        if not result.include or result.index is None:
            return None
        return self._sources[result.index]


def _any_of(regexes: list[str]) -> re.Pattern[str] | None:
    """One regex matching wherever any of ``regexes`` does (pathspec's regexes are
    searched, not matched): for a list, the prefilter that lets almost every path
    of a 100,000-file walk through in one call."""
    if not regexes:
        return None
    return re.compile("|".join(f"(?:{r.replace('(?P<ps_d>/)', '/')})" for r in regexes))


def check_patterns(patterns: Sequence[str], what: str) -> None:
    """Raise ``ValueError`` naming ``what[i]`` and the problem for the first unreadable pattern.

    For config validators: pydantic turns the ``ValueError`` into a refusal
    at load time that names the setting.
    """
    for i, pattern in enumerate(patterns):
        if isinstance(pattern, str) and (not pattern.strip() or pattern.strip().startswith("#")):
            continue
        try:
            PathRules([pattern])
        except PatternError as exc:
            raise ValueError(f"{what}[{i}]: {exc.message}") from None
