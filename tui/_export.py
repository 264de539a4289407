"""/export: the conversation as a Markdown file, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["export_markdown", "to_markdown"]


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def to_markdown(entries: Iterable[Any], *, title: str) -> tuple[str, int]:
    """(the Markdown, the number of messages in it)."""
    out = [f"# {title}", ""]
    n = 0
    for e in entries:
        d = e.data
        widget = e.widget
        if e.kind == "user":
            out += [f"## {'Steer' if d.get('kind') == 'steer' else 'You'}", "", str(d["text"]), ""]
        elif e.kind == "assistant":
            text = getattr(widget, "text", None) or d.get("text", "")
            out += ["## Abhed", "", str(text), ""]
        elif e.kind == "tool":
            try:
                args = json.dumps(d.get("args"), ensure_ascii=False, indent=2)
            except (TypeError, ValueError):
                args = str(d.get("args"))
            out += [f"### Tool call: {d.get('tool')} ({d.get('status', 'running')})", "",
                    _fence(args, "json"), ""]
            if d.get("output"):
                out += [_fence(str(d["output"])), ""]
        else:
            text = d.get("text", "")
            out += [f"> {str(text)}".replace("\n", "\n> "), ""]
        n += 1
    return "\n".join(out), n


def export_markdown(entries: Iterable[Any], target: Path, *, title: str) -> int:
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
