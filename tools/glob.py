"""glob: files matching a pattern, newest first, ignore rules applied."""

from __future__ import annotations

import os
import re
import stat

from pydantic import Field

from tools._paths import shorten
from tools._result import ToolFailure, ToolResult, success
from tools._tool import Args, Tool, ToolContext
from tools._walk import walk_files

__all__ = ["Glob", "GlobArgs", "compile_glob"]

_MAGIC = re.compile(r"[*?\[{]")
_MAX_PATTERN_CHARS = 4096  # no path can be longer, so neither can a useful pattern


class GlobArgs(Args):
    pattern: str = Field(description="Glob such as **/*.ts or src/**/*.test.js, relative to path.")
    path: str | None = Field(
        default=None, description="Absolute directory to search from. Defaults to the workspace root."
    )


class Glob(Tool):
    name = "glob"
    description = (
        "Find files by name pattern. Returns absolute paths, most recently modified first, so "
        "the files being worked on come up top. Syntax: * and ? match within one path segment "
        "(including dot-files), ** matches any number of directories, [abc] and {a,b} work; "
        "the pattern is relative to path, so '*.py' matches only directly inside it and "
        "'**/*.py' at any depth. Skips what .gitignore ignores, the operator's ignore list, and "
        "node_modules, .git, target, dist, __pycache__; never follows symlinks. At most 1000 "
        "results, with a note when more matched. Use grep to search file contents instead."
    )
    args_model = GlobArgs
    capabilities = frozenset({"fs:read"})

    def run(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        base = ws.root
        with ws.locate(ws.root):
            pass  # a missing root is workspace_unavailable, not an empty answer
        if args.path is not None:
            with ws.locate(args.path, field="path") as loc:
                if not loc.exists:
                    raise ToolFailure(
                        "not_found",
                        f"Directory not found: {loc.path}. Call glob without path to search the "
                        "whole workspace.",
                    )
                assert loc.st is not None
                if not stat.S_ISDIR(loc.st.st_mode):
                    raise ToolFailure(
                        "not_a_directory",
                        f"path {loc.path} is a file; glob searches directories. Pass its directory, "
                        "or read the file.",
                    )
                base = loc.path
        pattern = _relative_pattern(args.pattern, base)
        matcher = compile_glob(pattern)
        literal = _literal_prefix(pattern)
        start = os.path.normpath(os.path.join(base, literal)) if literal else base
        # The literal part of the pattern is walked like the rest: through real
        # directories only.  A symlink anywhere in it (not just at its end) would
        # otherwise lead the walk out of the workspace ("out/sub/*" with out -> /).
        if not ws.contains(start) or not _real_dir_below(base, start):
            hits: list[tuple[float, str]] = []
        else:
            prefix = os.path.relpath(start, base)
            hits = []
            for entry in walk_files(ws, start, ctx.settings):
                rel = entry.rel if prefix == "." else prefix + "/" + entry.rel
                if matcher.fullmatch(rel):
                    hits.append((entry.st.st_mtime, entry.path))
        if not hits:
            hint = ""
            if "/" not in args.pattern and not pattern.startswith("**"):
                hint = (
                    f" The pattern has no '/', so it only matches directly inside {base}; use "
                    f"'**/{pattern}' to search subdirectories."
                )
            return success(f"[no files matched: {args.pattern}]{hint}", count=0, total=0, base=base)
        hits.sort(key=lambda h: (-h[0], h[1]))
        cap = ctx.settings.glob_max_results
        shown = [p for _, p in hits[:cap]]
        body = "\n".join(shown)
        truncated = len(hits) > cap
        if truncated:
            body += (
                f"\n[truncated: showing the {cap} newest of {len(hits)} matches. Narrow the "
                "pattern or pass a deeper path to see the rest.]"
            )
        return success(body, truncated=truncated, count=len(shown), total=len(hits), base=base)


def _real_dir_below(base: str, start: str) -> bool:
    """Whether ``start`` is a directory reached from ``base`` without any symlink."""
    current = base
    for comp in [c for c in os.path.relpath(start, base).split("/") if c not in ("", ".")]:
        current = os.path.join(current, comp)
        try:
            st = os.lstat(current)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
    return os.path.isdir(start)


def _relative_pattern(pattern: str, base: str) -> str:
    if not pattern.strip():
        raise ToolFailure("invalid_pattern", "pattern is empty. Give a glob such as '**/*.py'.")
    if "\x00" in pattern:
        raise ToolFailure("invalid_pattern", "pattern contains a NUL byte.")
    if len(pattern) > _MAX_PATTERN_CHARS:
        raise ToolFailure(
            "invalid_pattern",
            f"pattern is {len(pattern)} characters long ({shorten(pattern)!r}); globs are limited to "
            f"{_MAX_PATTERN_CHARS}. Use a shorter pattern such as '**/*.py'.",
        )
    if os.path.isabs(pattern):
        root = base.rstrip("/") + "/"
        if not pattern.startswith(root):
            raise ToolFailure(
                "invalid_pattern",
                f"Absolute pattern {pattern!r} is not inside the search directory {base}. Give the "
                "pattern relative to path (e.g. 'src/**/*.py'), or set path to a directory that "
                "contains it.",
            )
        pattern = pattern[len(root):]
    parts = pattern.split("/")
    if ".." in parts:
        raise ToolFailure(
            "invalid_pattern",
            f"Pattern {pattern!r} contains '..'; patterns match beneath path only. Set path to the "
            "directory you want instead.",
        )
    return "/".join(p for p in parts if p not in ("", "."))


def _literal_prefix(pattern: str) -> str:
    parts = pattern.split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if _MAGIC.search(part):
            break
        literal.append(part)
    return "/".join(literal)


def compile_glob(pattern: str) -> re.Pattern[str]:
    """Translate a glob to a regex over '/'-separated relative paths."""
    segments = pattern.split("/")
    out: list[str] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "**":
            out.append("(?:.*)" if last else "(?:[^/]*/)*")
            continue
        out.append(_segment(seg) + ("" if last else "/"))
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error as exc:
        raise ToolFailure("invalid_pattern", f"Glob {pattern!r} is malformed ({exc}).") from None


def _class_body(inner: str, seg: str) -> str:
    """A glob class body as a regex class body: single characters and a-b ranges.

    Every special character is escaped, so nothing Python's re gives meaning inside a
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
                raise ToolFailure(
                    "invalid_pattern",
                    f"Glob segment {seg!r} has the range {first}-{last}, which runs backwards. "
                    "Write ranges low to high, e.g. [a-z].")
            out.append(re.escape(first) + "-" + re.escape(last))
            i += 3
        else:
            out.append(re.escape(first))
            i += 1
    return "".join(out)


def _segment(seg: str) -> str:
    res: list[str] = []
    i = 0
    depth = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1
            res.append("[^/]*")
        elif c == "?":
            res.append("[^/]")
        elif c == "[":
            # As in gitignore and fnmatch: a "]" right after "[" or "[!" is a
            # member, not the end of the class ("[]]" matches "]").
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
                res.append(("[^/" if negate else "[") + _class_body(inner, seg) + "]")
                i = j
        elif c == "{":
            depth += 1
            res.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            res.append(")")
        elif c == "," and depth:
            res.append("|")
        elif c == "\\" and i + 1 < len(seg):
            i += 1
            res.append(re.escape(seg[i]))
        else:
            res.append(re.escape(c))
        i += 1
    if depth:
        raise ToolFailure("invalid_pattern", f"Unbalanced '{{' in glob segment {seg!r}.")
    return "".join(res)
