"""Rich renderables for the transcript: Markdown, code, diffs, tool summaries.

Every string from the model or a tool goes through :func:`tui._safe.visible`
here, at the one place text becomes a renderable, so no path can skip it.
Themes are ANSI ones: they work on a 16-colour terminal and under NO_COLOR.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.text import Text

from tui._safe import visible

__all__ = ["code", "diff_for", "key_argument", "markdown", "plain"]

THEME = "ansi_dark"
DIFF_MAX_LINES = 60


def markdown(text: str) -> RenderableType:
    return Markdown(visible(text), code_theme=THEME, hyperlinks=False)


def code(text: str, lang: str) -> RenderableType:
    """Highlighted once, into a ``Text``: a ``Syntax`` would re-run the lexer on every layout
    and every paint (the profile of a 2,000-line fence is all pygments), a ``Text`` only wraps."""
    out = Syntax(visible(text), lang or "text", theme=THEME,
                 background_color="default").highlight(visible(text))
    out.rstrip()
    return out


def plain(text: str, style: str = "") -> Text:
    return Text(visible(text), style=style)


def key_argument(tool: str, args: Any) -> str:
    """The one argument that says what a call does: bash's command, a file tool's path."""
    if not isinstance(args, dict):
        return visible(str(args))[:200]
    if tool == "todo" and isinstance(args.get("items"), list):
        return f"{len(args['items'])} items"
    if tool == "plan" and isinstance(args.get("title"), str):
        return visible(args["title"])[:200]
    if tool == "task" and isinstance(args.get("description"), str):
        return visible(args["description"])[:200]
    for name in ("command", "path", "pattern", "query", "url", "name"):
        value = args.get(name)
        if isinstance(value, str):
            first = value.splitlines()[0] if value else ""
            more = " …" if "\n" in value else ""
            return visible(first)[:200] + more
    try:
        return visible(json.dumps(args, ensure_ascii=False))[:200]
    except (TypeError, ValueError):
        return ""


def diff_for(tool: str, args: Any, *, start_line: int | None = None) -> RenderableType | None:
    """A unified diff of what an edit or write does, from its arguments; None for other tools.

    Lines are numbered as in the file (old | new); ``start_line`` (the edit
    result's first changed line) anchors the numbers, 1 until it is known.
    """
    if not isinstance(args, dict) or tool not in ("edit", "write"):
        return None
    path = visible(str(args.get("path", "")))
    if tool == "edit":
        old = str(args.get("old_string", "")).splitlines()
        new = str(args.get("new_string", "")).splitlines()
        header = Text(f"edit {path}" + ("" if start_line else " (line numbers from 1 until the "
                                         "result names the line)"), style="bold")
    else:
        old, new = [], str(args.get("content", "")).splitlines()
        header = Text(f"write {path} (whole file, {len(new)} lines)", style="bold")
    base = start_line or 1
    out = Text()
    o = n = base
    shown = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        rows: list[tuple[str, str, str]] = []
        if tag == "equal":
            rows = [(f"{o + k:>5} {n + k:>5} ", " ", old[i1 + k]) for k in range(i2 - i1)]
        else:
            rows = [(f"{o + k:>5}       ", "-", old[i1 + k]) for k in range(i2 - i1)]
            rows += [(f"      {n + k:>5} ", "+", new[j1 + k]) for k in range(j2 - j1)]
        o += i2 - i1
        n += j2 - j1
        for nums, sign, line in rows:
            if shown >= DIFF_MAX_LINES:
                break
            style = {"-": "red", "+": "green"}.get(sign, "")
            out.append(nums, style="dim")
            out.append(sign + " " + visible(line[:300]) + "\n", style=style)
            shown += 1
    out.rstrip()
    total = max(len(old), len(new))
    parts: list[RenderableType] = [header, out]
    if shown >= DIFF_MAX_LINES:
        parts.append(Text(f"… diff cut at {DIFF_MAX_LINES} lines (of about {total}); expand the "
                          "card or read the file for the rest", style="dim"))
    return Group(*parts)
