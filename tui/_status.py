"""The status line: model, mode, sandbox, context and tokens, the queue, and what the agent does.

One line at the bottom, rebuilt from the app's state whenever that state
changes (:meth:`StatusLine.show`); a line equal to the one on screen is not
drawn again, so calling it often costs a comparison, not a frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import Static

from tui._render import plain

if TYPE_CHECKING:
    from tui._app import AbhedApp

__all__ = ["StatusLine", "status_text"]


class StatusLine(Static):
    """The bottom line; :meth:`show` redraws it only when its text or styles changed."""

    DEFAULT_CSS = "StatusLine { height: 1; padding: 0 1; background: $panel; }"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._shown: tuple[str, tuple[Any, ...]] = ("", ())

    def show(self, app: AbhedApp) -> None:
        t = status_text(app)
        shown = (t.plain, tuple(t.spans))
        if shown != self._shown:  # an unchanged line is not drawn again
            self._shown = shown
            self.update(t)


def status_text(app: AbhedApp) -> Text:
    """The line for the app as it is now: the session's facts, then the agent's state."""
    t = Text()
    info = app.info
    view = app.view
    if info is not None:
        t.append(plain(info.model, "bold"))
        t.append(f" · {info.mode} · ")
        if info.sandbox == "host":
            t.append("UNSANDBOXED", style="bold white on red")
        else:
            t.append(plain(info.sandbox))
        if info.context_window:
            pct = 100 * view.context_tokens / info.context_window
            t.append(f" · ctx {pct:.0f}%", style="red" if pct > 90 else "")
        t.append(f" · {view.tokens:,} tok")
    else:
        model = app.preparing or str(app.options.get("model") or "")
        t.append(plain(model or "Abhed", "bold"))
    if app.queue:
        t.append(f" · {len(app.queue)} queued")
    if app.waiting:
        t.append(f" · {len(app.waiting)} to send once started")
    if view.current_item:
        t.append(plain(f" · ▶ {view.current_item[:40]}"))
    t.append(" · ")
    busy = app.running or app.state == "starting"
    state = app.state
    if state == "starting" and app.preparing:
        state = f"starting: reaching {app.preparing}"
    t.append(("● " if busy else "○ ") + state, style="yellow" if busy else "green")
    return t
