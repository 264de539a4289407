"""Rich renderables for the transcript: Markdown, code, diffs, tool summaries.

Every string from the model or a tool goes through :func:`tui._safe.visible`
here, at the one place text becomes a renderable, so no path can skip it.
Themes are ANSI ones: they work on a 16-colour terminal and under NO_COLOR.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.text import Text

from tui._safe import visible

__all__ = ["args_diff", "code", "markdown", "plain", "unified_diff"]

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


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def unified_diff(diff: str, *, max_lines: int = DIFF_MAX_LINES) -> RenderableType:
    """A unified diff drawn with the file's line numbers (old | new), removals red, additions
    green, at most ``max_lines`` rows with the count of the rest."""
    out = Text()
    o = n = 0
    shown = 0
    left = 0
    header = ""
    for raw in diff.split("\n"):
        if raw.startswith("--- "):
            continue
        if raw.startswith("+++ "):
            header = raw[4:].strip()
            continue
        m = _HUNK.match(raw)
        if m:
            o, n = int(m.group(1)), int(m.group(2))
            if shown:
                if shown < max_lines:
                    out.append("    ⋮\n", style="dim")
                    shown += 1
                else:
                    left += 1
            continue
        if not raw:  # the split after the diff's last newline; an empty context line is " "
            continue
        sign, line = (raw[:1], raw[1:]) if raw[:1] in ("+", "-", " ") else (" ", raw)
        if raw.startswith(("[", "\\")):  # "[diff truncated]", "\\ No newline at end of file"
            sign, line = "", raw
        if shown >= max_lines:
            left += 1
            continue
        if sign == "-":
            nums, style = f"{o:>5}       ", "red"
            o += 1
        elif sign == "+":
            nums, style = f"      {n:>5} ", "green"
            n += 1
        elif sign == " ":
            nums, style = f"{o:>5} {n:>5} ", ""
            o += 1
            n += 1
        else:
            nums, style = "", "dim"
        out.append(nums, style="dim")
        out.append((sign + " " if sign else "") + visible(line[:300]) + "\n", style=style)
        shown += 1
    out.rstrip()
    parts: list[RenderableType] = []
    if header and header != "/dev/null":
        parts.append(Text(visible(header), style="bold"))
    parts.append(out)
    if left:
        parts.append(Text(f"… {left:,} more diff line{'s' if left != 1 else ''} (expand the "
                          "card, or read the file)", style="dim"))
    return Group(*parts)


def args_diff(tool: str, args: Any) -> RenderableType | None:
    """What an edit or write changes, from its arguments alone (no line numbers: the file on
    disk was not read); for when no diff against the file could be made."""
    if not isinstance(args, dict) or tool not in ("edit", "write"):
        return None
    path = visible(str(args.get("path", "")))
    if tool == "edit":
        old = str(args.get("old_string", "")).splitlines()
        new = str(args.get("new_string", "")).splitlines()
        head = f"edit {path} (where in the file is not known yet)"
    else:
        old, new = [], str(args.get("content", "")).splitlines()
        head = f"write {path} (whole file, {len(new):,} lines)"
    out = Text()
    rows = [("-", ln) for ln in old] + [("+", ln) for ln in new]
    for sign, line in rows[:DIFF_MAX_LINES]:
        out.append(f"{sign} {visible(line[:300])}\n", style="red" if sign == "-" else "green")
    out.rstrip()
    parts: list[RenderableType] = [Text(head, style="bold"), out]
    if len(rows) > DIFF_MAX_LINES:
        parts.append(Text(f"… {len(rows) - DIFF_MAX_LINES:,} more lines", style="dim"))
    return Group(*parts)
