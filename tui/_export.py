"""/export: the conversation as a Markdown file, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tui._entries import AssistantEntry, Entry, ToolEntry, UserEntry

__all__ = ["export_markdown", "to_markdown"]


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def to_markdown(entries: Iterable[Entry], *, title: str) -> tuple[str, int]:
    """(the Markdown, the number of messages in it)."""
    out = [f"# {title}", ""]
    n = 0
    for e in entries:
        if isinstance(e, UserEntry):
            out += [f"## {'Steer' if e.kind == 'steer' else 'You'}", "", e.body, ""]
        elif isinstance(e, AssistantEntry):
            out += ["## Abhed", "", e.body, ""]
        elif isinstance(e, ToolEntry):
            try:
                args = json.dumps(e.args, ensure_ascii=False, indent=2)
            except (TypeError, ValueError):
                args = str(e.args)
            label = e.outcome.label if e.outcome is not None else e.status
            out += [f"### Tool call: {e.tool} ({label})", "", _fence(args, "json"), ""]
            if e.output:
                out += [_fence(e.output), ""]
        else:
            out += [f"> {e.text()}".replace("\n", "\n> "), ""]
        n += 1
    return "\n".join(out), n


def export_markdown(entries: Iterable[Entry], target: Path, *, title: str) -> int:
    text, n = to_markdown(entries, title=title)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".abhed-export-", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return n
