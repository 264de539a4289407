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
from tools.pathpattern import MAX_PATTERN_CHARS, PathPattern

__all__ = ["Glob", "GlobArgs"]

_MAGIC = re.compile(r"[*?\[{\\]")


class GlobArgs(Args):
    pattern: str = Field(description="Glob such as **/*.ts or src/**/*.test.js, relative to path.")
    path: str | None = Field(
        default=None, description="Absolute directory to search from. Defaults to the workspace root."
    )


class Glob(Tool):
    name = "glob"
    description = (
        "Find files by name pattern. Returns absolute paths, most recently modified first, so "
        "the files being worked on come up top. Patterns follow .gitignore rules plus braces: "
        "* and ? match within one path segment (including dot-files), ** any number of "
        "directories, [abc] and {a,b} work. A pattern without '/' matches names at any depth "
        "('*.py' finds every Python file); one with '/' is anchored at path ('src/*.py'); a "
        "directory name matches everything beneath it; './' in front anchors a name at path; a leading ! inverts. Skips what .gitignore ignores, the operator's ignore list, and "
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
        matcher = PathPattern(pattern)
        literal = _literal_prefix(pattern, matcher)
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
                if matcher.match(rel):
                    hits.append((entry.st.st_mtime, entry.path))
        if not hits:
            return success(f"[no files matched: {args.pattern}]", count=0, total=0, base=base)
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
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolFailure(
            "invalid_pattern",
            f"pattern is {len(pattern)} characters long ({shorten(pattern)!r}); globs are limited to "
            f"{MAX_PATTERN_CHARS}. Use a shorter pattern such as '**/*.py'.",
        )
    anchored = False
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
        anchored = True  # an absolute pattern names a place, not a name at any depth
    elif pattern.startswith("./"):
        anchored = True
    parts = pattern.split("/")
    if ".." in parts:
        raise ToolFailure(
            "invalid_pattern",
            f"Pattern {pattern!r} contains '..'; patterns match beneath path only. Set path to the "
            "directory you want instead.",
        )
    # Empty and "." segments go, but a leading "/" (anchors) and a trailing one
    # (directories only) keep their meaning.
    inner = "/".join(p for p in parts if p not in ("", "."))
    lead = "/" if anchored and inner else ""
    trail = "/" if pattern.endswith("/") and inner else ""
    return lead + inner + trail


def _literal_prefix(pattern: str, compiled: PathPattern) -> str:
    """The leading directories an anchored pattern names literally: where the walk can start."""
    if not compiled.anchored or pattern.startswith("!"):
        return ""
    parts = pattern.lstrip("/").split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if _MAGIC.search(part):
            break
        literal.append(part)
    return "/".join(literal)
