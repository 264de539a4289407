"""The message box: multi-line, Enter sends, Tab queues or completes.

A ``TextArea`` so a paste of 10,000 lines arrives whole (an ``Input`` would
flatten it); a paste over :data:`MAX_PROMPT_CHARS` is refused with a notice
saying so, never cut silently (claude-code#13328).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea

__all__ = ["MAX_PROMPT_CHARS", "Composer"]

MAX_PROMPT_CHARS = 1_000_000  # as `abhed run` allows; a bigger text belongs in a file
# The longest the render clock waits for a typed key's frame (docs/performance.md, issue 33):
# longer than a slow frame, short enough that a stream never visibly stalls.
ECHO_FIRST_S = 0.1
TYPING_S = 0.5  # keys this close together: the person is typing, and the stream draws slower


class Composer(TextArea):
    """Posts :class:`Send` on Enter and :class:`Tabbed` on Tab; Ctrl+J inserts a newline.

    Up on the first line and Down on the last recall earlier prompts (:class:`Recall`);
    Home and End with nothing typed scroll the conversation (:class:`Scroll`), with
    text they move the cursor as in any text box.
    """

    DEFAULT_CSS = """
    Composer { height: auto; max-height: 10; min-height: 3; border: round $primary; padding: 0 1; }
    Composer:focus { border: round $accent; }
    """

    @dataclass
    class Send(Message):
        text: str

    class Tabbed(Message):
        """Tab: the app completes a / command or an @path, or queues the message."""

    class UpOnEmpty(Message):
        """Up with nothing typed: the app hands back the last queued message."""

    @dataclass
    class Recall(Message):
        """Up on the first line or Down on the last: an earlier or later prompt (history)."""

        step: int

    @dataclass
    class Scroll(Message):
        """Home or End with nothing typed: the conversation's top or its newest output."""

        where: str

    @dataclass
    class PasteRefused(Message):
        size: int

    def __init__(self, **kw: object) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus",
                         placeholder="Type a task; Enter sends, Ctrl+J a new line, /help keys",
                         **kw)  # type: ignore[arg-type]
        self._key_at: float | None = None  # when the key not yet shown on screen arrived
        self._last_key_at = float("-inf")
        self.clock: Callable[[], float] = time.monotonic  # the app's, once mounted

    @property
    def echo_pending(self) -> bool:
        """A key arrived and the frame that shows it is not drawn yet (for at most
        :data:`ECHO_FIRST_S`): the app's render clock waits, so that frame is a cheap one."""
        since = self._key_at
        return since is not None and self.clock() - since < ECHO_FIRST_S

    @property
    def typing(self) -> bool:
        """A key arrived within the last :data:`TYPING_S`: the person is typing."""
        return self.clock() - self._last_key_at < TYPING_S

    def _echoed(self) -> None:
        self._key_at = None

    async def _on_key(self, event: events.Key) -> None:
        self._last_key_at = self.clock()
        if self._key_at is None:
            self._key_at = self._last_key_at
            self.call_after_refresh(self._echoed)
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Send(self.text))
            return
        if event.key == "ctrl+j":
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key == "tab":
            event.stop()
            event.prevent_default()
            self.post_message(self.Tabbed())
            return
        if event.key == "up" and not self.text:
            event.stop()
            event.prevent_default()
            self.post_message(self.UpOnEmpty())
            return
        row = self.cursor_location[0]
        if (event.key == "up" and row == 0) or \
                (event.key == "down" and row == self.document.line_count - 1):
            event.stop()
            event.prevent_default()
            self.post_message(self.Recall(-1 if event.key == "up" else 1))
            return
        if event.key in ("home", "end") and not self.text:
            event.stop()
            event.prevent_default()
            self.post_message(self.Scroll(event.key))
            return
        # Anything else: TextArea's own _on_key runs next (Textual dispatches along the MRO).

    async def _on_paste(self, event: events.Paste) -> None:
        if len(self.text) + len(event.text) > MAX_PROMPT_CHARS:
            event.stop()
            event.prevent_default()
            self.post_message(self.PasteRefused(len(event.text)))
        # Otherwise TextArea's own _on_paste inserts it (Textual dispatches along the MRO).
