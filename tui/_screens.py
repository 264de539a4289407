"""The /resume picker: this workspace's earlier sessions with their time and first prompt."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui._safe import visible

__all__ = ["SessionPicker"]


class SessionPicker(ModalScreen[str | None]):
    """Enter resumes the highlighted session; Esc or Ctrl+C goes back (the app's own Esc and
    Ctrl+C defer to an open picker)."""

    BINDINGS = [Binding("escape", "dismiss_none", "back", priority=True),
                Binding("ctrl+c", "dismiss_none", "back", priority=True)]
    DEFAULT_CSS = """
    SessionPicker { align: center middle; }
    SessionPicker > Static { width: 90%; height: auto; background: $panel; padding: 0 1; }
    SessionPicker > OptionList { width: 90%; height: 70%; border: round $accent; }
    """

    def __init__(self, sessions: list[dict[str, Any]], *, current: str | None = None,
                 others: int = 0) -> None:
        """``sessions``: this workspace's, newest first; ``others``: how many other workspaces
        hold (not listed: they cannot be resumed here)."""
        super().__init__()
        self.sessions = sessions[:200]
        self.current = current
        self.others = others

    def compose(self) -> ComposeResult:
        head = "Resume which session of this workspace? (Enter resumes, Esc or Ctrl+C goes back)"
        if self.others:
            head += (f"\n{self.others} session{'s' if self.others != 1 else ''} of other "
                     "workspaces not listed: `abhed tui -w DIR` opens a workspace")
        yield Static(head)
        options = []
        for s in self.sessions:
            when = str(s.get("last_event_at") or s.get("created_at") or "")[:19].replace("T", " ")
            first = visible(str(s.get("first_prompt", "")).replace("\n", " "))[:60] or "(no prompt)"
            here = "  (open now)" if s["id"] == self.current else ""
            options.append(Option(f"{when}  {visible(str(s['id']))[:40]}  {first}{here}",
                                  id=str(s["id"])))
        yield OptionList(*options)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
