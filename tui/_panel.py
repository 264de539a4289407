"""The side panel (the todo list and the plan) and the "new output below" mark.

Both are plain ``Static`` widgets the app shows or hides; what they say
comes from the session's ``todo_updated`` and ``plan_updated`` events
(:mod:`tui._event_map`) and from the transcript's scroll position.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui._render import plain

__all__ = ["BelowMark", "SidePanel"]


class SidePanel(Static):
    """The todo list and the plan, each a bold title over its body."""

    DEFAULT_CSS = """
    SidePanel { width: 34; height: 1fr; border-left: solid $panel-lighten-2; padding: 0 1; }
    """

    def show_items(self, items: dict[str, str]) -> None:
        """``items``: name -> "Title\\nbody", in the order they were first recorded."""
        out = Text()
        for body in items.values():
            head, _, rest = body.partition("\n")
            out.append(plain(head + "\n", "bold"))
            out.append(plain(rest + "\n\n"))
        self.update(out)


class BelowMark(Static):
    """"New output below" while the conversation is scrolled up."""

    DEFAULT_CSS = """
    BelowMark { height: 1; display: none; background: $warning 30%; color: $text;
                text-align: center; }
    """
