"""grep: search file contents with RE2, by ripgrep or by the pure-Python engine.

The search runs in three steps, whichever engine is used:

1. the candidate files are listed once (:mod:`tools._grep._candidates`):
   ignore rules, the ``glob`` filter and the secret-path policy applied,
   sorted by path;
2. the engine scans them all for the files that match (and line counts in
   count mode);
3. in content mode, the engine lists the matching lines of only the first
   files, as many as the 100-line cap can show, and shared code prints them.
"""

from __future__ import annotations

import stat
from typing import Annotated, Any, Literal

from pydantic import Field

from tools._grep import (
    MAX_FILES,
    MAX_LINES_PER_FILE,
    MAX_MATCH_LINES,
    Engine,
    PythonEngine,
    RipgrepEngine,
    collect,
    compile_query,
    content_block,
    find_rg,
    no_matches,
    select_engine,
)
from tools._grep._query import Query
from tools._grep._ripgrep import RipgrepFailed
from tools._result import ToolFailure, ToolResult, success
from tools._tool import Args, Tool, ToolContext

# The tool, then the engine level beneath it: benchmarks/grep times the engines side by
# side through these (scripts outside the package use public names only).
__all__ = ["Engine", "Grep", "GrepArgs", "PythonEngine", "RipgrepEngine", "collect",
           "compile_query", "find_rg", "search"]

MAX_CONTEXT = 20


class GrepArgs(Args):
    pattern: str = Field(description="Regular expression (RE2 syntax).")
    path: str | None = Field(
        default=None,
        description="Absolute path of a file or directory to search. Defaults to the workspace root.",
    )
    glob: str | None = Field(
        default=None,
        description="Only search files matching this glob: '*.go' matches names at any depth, "
        "'src/**/*.ts' paths relative to path; a leading '!' excludes.",
    )
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        default="files_with_matches",
        description="files_with_matches (default): matching file paths; content: matching lines; "
        "count: matching lines per file.",
    )
    context: Annotated[int, Field(ge=0, le=MAX_CONTEXT)] = Field(
        default=0, description="Lines of context around each match (content mode only)."
    )
    case_insensitive: bool = Field(default=False, description="Ignore case (Unicode-aware).")
    multiline: bool = Field(
        default=False,
        description="Match across lines: '.' also matches a newline and the pattern may contain \\n.",
    )


class Grep(Tool):
    name = "grep"
    description = (
        "Search file contents with a regular expression. This is the primary code-navigation "
        "tool: prefer it over reading files speculatively. Start with the default output_mode "
        "files_with_matches (just paths), then use content (matching lines as "
        "'path:line:text', context lines as 'path-line-text') or count on a narrower path or "
        "glob. Syntax is RE2: no lookahead/lookbehind or backreferences (grep says what to use "
        "instead); \\d \\w \\s \\b are ASCII. Each line is matched on its own unless multiline "
        "is true. Results are absolute paths sorted by path; content shows at most 100 matching "
        "lines and 50 output lines per file (context lines count), with a note when there are "
        "more. Skips binary files, what "
        ".gitignore ignores, the operator's ignore list, node_modules/.git/target/dist/"
        "__pycache__ and secret files; hidden files are searched."
    )
    args_model = GrepArgs
    capabilities = frozenset({"fs:read"})

    def run(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        if args.context and args.output_mode != "content":
            raise ToolFailure(
                "invalid_arguments",
                f"context applies to output_mode 'content' only; got output_mode "
                f"{args.output_mode!r}. Drop context or set output_mode to 'content'.",
            )
        query = compile_query(args.pattern, multiline=args.multiline,
                              case_insensitive=args.case_insensitive)
        base, is_dir = self._base(args, ctx)
        cands = collect(ws, base, is_dir, args.glob, ctx.settings)
        engine = select_engine(ctx.settings.grep_engine, ws.root)
        try:
            return search(engine, query, cands.files, args, cands.secret_skipped, base)
        except RipgrepFailed as exc:
            # The translation to ripgrep's dialect failed for this pattern: the
            # Python engine gives the same answer, only slower.
            result = search(PythonEngine(), query, cands.files, args, cands.secret_skipped, base)
            result.details["engine_fallback"] = f"ripgrep failed: {exc}"
            return result

    def _base(self, args: GrepArgs, ctx: ToolContext) -> tuple[str, bool]:
        ws = ctx.workspace
        if args.path is None:
            return ws.root, True
        with ws.locate(args.path, field="path") as loc:
            if not loc.exists:
                raise ToolFailure(
                    "not_found",
                    f"Path not found: {loc.path}. Call grep without path to search the whole "
                    "workspace, or use glob to find the right directory.",
                )
            assert loc.st is not None
            if stat.S_ISDIR(loc.st.st_mode):
                return loc.path, True
            if not stat.S_ISREG(loc.st.st_mode):
                raise ToolFailure("not_a_file", f"{loc.path} is neither a regular file nor a "
                                  "directory; grep searches files.")
            return loc.path, False


def search(engine: Engine, query: Query, files: list[str], args: GrepArgs,
           secret_skipped: int, base: str) -> ToolResult:
    """Search ``files`` with ``engine`` and shape the result as the tool returns it."""
    mode = args.output_mode
    scan = engine.scan(files, query, count=(mode == "count"))
    matched = sorted(scan.counts)
    details: dict[str, Any] = {
        "engine": engine.name,
        "base": base,
        "files_searched": len(files),
        "matched_files": len(matched),
        "binary_skipped": len(scan.binary),
        "binary_files": sorted(scan.binary)[:20],
        "secret_skipped": secret_skipped,
        "unreadable": len(scan.unreadable),
    }
    notes: list[str] = []
    if scan.binary:
        notes.append(f"[{len(scan.binary)} binary file(s) also match and were skipped; they "
                     "hold NUL bytes. Use bash tools made for them if you need their contents.]")
    if not matched:
        return success("\n".join([no_matches(args.pattern), *notes]), **details)
    if mode == "files_with_matches":
        return _listing(matched, matched, notes, details, "matching files")
    if mode == "count":
        rows = [f"{p}:{scan.counts[p]}" for p in matched]
        details["total_lines"] = sum(scan.counts.values())
        return _listing(rows, matched, notes, details, "files with matches")
    return _content(engine, query, matched, args, notes, details)


def _listing(rows: list[str], matched: list[str], notes: list[str],
             details: dict[str, Any], what: str) -> ToolResult:
    truncated = len(rows) > MAX_FILES
    body = rows[:MAX_FILES]
    if truncated:
        body.append(f"[truncated: showing the first {MAX_FILES} of {len(matched)} {what}, "
                    "sorted by path. Narrow with a deeper path, a glob such as '*.py', or a "
                    "more specific pattern.]")
    return success("\n".join(body + notes), truncated=truncated, **details)


def _content(engine: Engine, query: Query, matched: list[str], args: GrepArgs, notes: list[str],
             details: dict[str, Any]) -> ToolResult:
    # Every matched file has at least one matching line, so the first
    # MAX_MATCH_LINES files always suffice to fill the page.
    wanted = matched[:MAX_MATCH_LINES]
    found = engine.lines(wanted, query, max_lines=MAX_LINES_PER_FILE + 1)
    out: list[str] = []
    shown = 0
    files_shown = 0
    truncated = False
    for path in wanted:
        lines = found.get(path)
        if not lines:
            continue
        room = min(MAX_MATCH_LINES - shown, MAX_LINES_PER_FILE)
        if room <= 0:
            truncated = True
            break
        block, used = content_block(path, lines[:room], args.context,
                                    max_lines=MAX_LINES_PER_FILE)
        page = lines[:used]
        if out:
            out.append("--")
        out.extend(block)
        shown += len(page)
        files_shown += 1
        if len(lines) > len(page):
            truncated = True
            where = page[-1].number
            out.append(f"[{path}: more matching lines after line {where} not shown. Narrow the "
                       f"pattern, or read the file from line {where + 1}.]")
    if files_shown < len(matched):
        truncated = True
        out.append(f"[truncated: {shown} matching lines shown from {files_shown} of "
                   f"{len(matched)} matching files (sorted by path). Narrow with path or glob, "
                   "make the pattern more specific, or use output_mode 'count' to see where the "
                   "matches are.]")
    details["lines_shown"] = shown
    return success("\n".join(out + notes), truncated=truncated, **details)
