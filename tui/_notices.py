"""What start-up said, and which of it to say now.

A degradation (bubblewrap instead of a microVM, a development checkout with
no site settings) is said the first time it comes up in this terminal
session, then only by the status line and /sandbox; a loss (no sandbox at
all, an MCP server refused, an extension dead) is said in red at every
start.  "This terminal session" is ``appliance.compose.first_in_terminal``'s
rule, the one every door that prints to a person follows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui._link import LinkInfo

__all__ = ["demo_model_note", "setup_notes"]


def setup_notes(info: LinkInfo) -> list[tuple[str, bool]]:
    """The notes to add for this start, each ``(text, error)``, in the order start-up said them."""
    from appliance.compose import first_in_terminal  # loaded by now: the agent has started

    out: list[tuple[str, bool]] = []
    for notice in info.notices:
        if notice.degraded_only:
            if first_in_terminal(notice.message):
                again = "; /sandbox says it again" if notice.kind.startswith("sandbox") else ""
                out.append((f"note: {notice.message} (said once{again})", False))
            continue
        out.append((notice.message, True))
    return out


def demo_model_note(model: str) -> str:
    """What a tiny demonstration model can do, said plainly (once per TUI session)."""
    return (f"{model} is a tiny demonstration model: it cannot choose a tool by itself, so here "
            "it answers from what it already knows instead of reading your files, and its answers "
            "are often wrong. It shows the path from you to a model and back, not a coding agent "
            "at work; real work needs a real model on a GPU host (docs/providers.md).")
