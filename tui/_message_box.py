"""The message box's side of the app: sending, steering, queueing, completing, recalling.

What happens when the person presses Enter, Tab or Up in the composer
(:class:`~tui._composer.Composer`, which only posts messages): a / command goes
to :class:`~tui._commands.SlashCommands`, a prompt is sent, steers the running
turn, or waits in the queue; Tab completes a command or an @path; Up takes back
the last queued message or recalls history.  A mixin of :class:`~tui.AbhedApp`,
whose state (the link, the queue, the history) it reads and changes: Textual
finds these ``on_composer_*`` handlers along the app's class hierarchy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.widgets import Static

from tui._commands import COMMANDS, SlashCommands, complete_command
from tui._composer import MAX_PROMPT_CHARS, Composer
from tui._render import plain

if TYPE_CHECKING:
    from textual.timer import Timer

    from tui._history import PromptHistory
    from tui._link import AgentLink
    from tui._transcript import Transcript

__all__ = ["MessageBox"]


class _Host(Protocol):
    """What of :class:`~tui.AbhedApp` the message box reads and changes (mypy's self-type
    for a mixin)."""

    queue: list[str]
    waiting: list[str]
    running: bool
    state: str
    link: AgentLink | None
    history: PromptHistory | None
    commands: SlashCommands
    queue_view: Static
    suggest_view: Static
    _clock_timer: Timer | None
    _suggestions: list[str]
    _suggest_index: int

    @property
    def composer(self) -> Composer: ...
    @property
    def transcript(self) -> Transcript: ...
    def note(self, text: str, *, error: bool = False) -> None: ...
    def notify(self, message: str) -> None: ...
    def show_status(self) -> None: ...
    def submit(self, text: str) -> None: ...
    def show_queue(self) -> None: ...
    def _suggest(self, options: list[str]) -> None: ...
    def on_composer_recall(self, msg: Composer.Recall) -> None: ...


class MessageBox:
    """The composer's messages, handled for :class:`~tui.AbhedApp` (a mixin of it)."""

    def on_composer_send(self: _Host, msg: Composer.Send) -> None:
        text = msg.text
        if self._suggestions and text.startswith("/") and " " not in text.strip() \
                and text.strip() not in COMMANDS:
            text = self._suggestions[self._suggest_index % len(self._suggestions)]
        if not text.strip():
            return
        self.composer.text = ""
        self._suggest([])
        if text.startswith("/"):
            self.commands.run(text.strip())
            return
        if self.history is not None:
            self.history.add(text)
        if self.running:
            if self.link is not None and self.link.steer(text):
                self.notify("steering: the message reaches the model before its next step")
            else:
                self.queue.append(text)
                self.show_queue()
            return
        self.submit(text)

    def submit(self: _Host, text: str) -> None:
        """Send a prompt: now, or once the agent has started (Enter during ● starting)."""
        if self.link is None or self.link.agent is None:
            if self.state == "starting":
                self.waiting.append(text)
                self.notify("the agent is starting; the message is sent as soon as it is ready")
                self.show_status()
                return
            self.note("the agent is not running, so the message was not sent; the error above "
                      "says why. Press Ctrl+R to try again once it is fixed", error=True)
            self.composer.text = text
            self.composer.move_cursor(self.composer.document.end)
            return
        if not self.link.submit(text):
            self.queue.insert(0, text)  # the agent is still busy: kept, sent after this turn
            self.show_queue()
        else:
            self.running = True
            self.state = "thinking"
            self.transcript.follow_end()  # a new prompt brings the conversation back into view
            if self._clock_timer is not None:
                self._clock_timer.resume()
        self.show_status()

    def on_composer_tabbed(self: _Host, msg: Composer.Tabbed) -> None:
        text = self.composer.text
        if text.startswith("/") and "\n" not in text:
            options = complete_command(text)
            if options:
                pick = options[self._suggest_index % len(options)] if self._suggestions else options[0]
                self._suggest_index += 1
                self.composer.text = pick + " "
                self.composer.move_cursor(self.composer.document.end)
                self._suggest(options)
            return
        word = text.rsplit(None, 1)[-1] if text.strip() else ""
        if word.startswith("@") and self.link is not None:
            options = self.link.complete_paths(word[1:])
            if options:
                self.composer.text = text[: len(text) - len(word)] + "@" + options[0]
                self.composer.move_cursor(self.composer.document.end)
            self._suggest(options)
            return
        if self.running and text.strip():
            self.queue.append(text)
            self.composer.text = ""
            self.show_queue()
            self.show_status()

    def on_composer_up_on_empty(self: _Host, msg: Composer.UpOnEmpty) -> None:
        if self.queue:
            self.composer.text = self.queue.pop()
            self.composer.move_cursor(self.composer.document.end)
            self.show_queue()
            self.show_status()
            return
        self.on_composer_recall(Composer.Recall(-1))

    def on_composer_recall(self: _Host, msg: Composer.Recall) -> None:
        if self.history is None:
            return
        text = self.history.step(msg.step, self.composer.text)
        if text is None:
            return
        self.composer.text = text
        self.composer.move_cursor(self.composer.document.end)

    def on_composer_scroll(self: _Host, msg: Composer.Scroll) -> None:
        if msg.where == "home":
            self.transcript.home()
        else:
            self.transcript.follow_end()

    def on_composer_paste_refused(self: _Host, msg: Composer.PasteRefused) -> None:
        self.note(f"paste refused: it is {msg.size:,} characters and a message may hold "
                  f"{MAX_PROMPT_CHARS:,}; nothing was pasted. Put it in a file in the workspace "
                  "and ask the agent to read it.", error=True)

    def on_text_area_changed(self: _Host, event: Composer.Changed) -> None:
        text = self.composer.text
        if text.startswith("/") and "\n" not in text and " " not in text:
            self._suggest(complete_command(text))
        elif not text:
            self._suggest([])

    def _suggest(self: _Host, options: list[str]) -> None:
        if options != self._suggestions:
            self._suggest_index = 0
        self._suggestions = options
        view = self.suggest_view
        view.display = bool(options)
        lines = [f"{o}  {COMMANDS.get(o, '')}" for o in options[:8]]
        view.update(plain("\n".join(lines) + ("\n(Tab completes)" if options else "")))

    def show_queue(self: _Host) -> None:
        view = self.queue_view
        view.display = bool(self.queue)
        view.update(plain("\n".join(f"queued {i + 1}: {q.splitlines()[0][:100] if q else ''}"
                                    for i, q in enumerate(self.queue))
                          + "\n(Up on an empty input takes the last one back to edit)"))
