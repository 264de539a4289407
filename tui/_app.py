"""The Abhed TUI: a transcript, an approval card, a composer and a status line.

The app renders what the agent records and relays what the person decides;
it decides nothing itself.  It talks to the appliance only through
:class:`tui._link.AgentLink` (``link_factory`` swaps it in tests), and
says events in the words of ``appliance.events.show`` (the words every
door uses); only the layout is its own.

Keys (the full table is ``tui._commands.KEYS``, shown by /help and in
docs/tui.md): Esc interrupts and never quits; Ctrl+C clears, interrupts, and
quits only when pressed twice on an empty idle screen; Ctrl+D quits; Enter
sends, or steers while the agent works; Tab queues while it works.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Static

if TYPE_CHECKING:  # imported on the link's start thread, after the first frame
    from appliance.compose import Config
    from appliance.events import EventStore
from tui._approval import GUARD_S, ApprovalCard
from tui._commands import SlashCommands
from tui._composer import Composer
from tui._copy import copy_text
from tui._entries import NoticeEntry, ToolEntry
from tui._event_map import EventMap
from tui._history import PromptHistory
from tui._link import AgentLink, LinkInfo, PendingApproval, Sink
from tui._memory import trim
from tui._message_box import MessageBox
from tui._messages import (
    ApprovalAsked,
    AppSink,
    EventArrived,
    LinkFailed,
    LinkPreparing,
    LinkStarted,
    LinkWaiting,
    RunFinished,
)
from tui._notices import setup_notes
from tui._panel import BelowMark, SidePanel
from tui._render import plain
from tui._screens import SessionPicker
from tui._status import StatusLine
from tui._stream import DeltaBuffer
from tui._transcript import Transcript

__all__ = ["AbhedApp", "LinkFactory", "run_tui", "tune_gc"]

RENDER_HZ = 25
TYPING_EVERY = 3  # while the person types, the stream is drawn on every third beat (~8 Hz)
TRIM_EVERY_S = 2.0  # how often a quiet screen may give freed memory back (tui._memory)
QUIT_WINDOW_S = 2.0
LinkFactory = Callable[..., AgentLink]


class AbhedApp(MessageBox, App[int]):
    """One workspace, one session at a time.

    The app holds the session's state (the link, what it is doing, the
    queue) and routes: recorded events and streamed text to
    :class:`~tui._event_map.EventMap`, slash commands to
    :class:`~tui._commands.SlashCommands`, its state to the
    :class:`~tui._status.StatusLine`, the composer's messages to
    :class:`~tui._message_box.MessageBox` (a mixin); the keys are its own.
    """

    TITLE = "Abhed"
    CSS = """
    Screen { layout: vertical; }
    #main { height: 1fr; }
    #conversation { height: 1fr; }
    #bottom { height: auto; }
    #queue { height: auto; max-height: 6; color: $text-muted; padding: 0 1; display: none; }
    #suggest { height: auto; max-height: 8; color: $text-muted; padding: 0 1; display: none; }
    """
    BINDINGS = [
        Binding("escape", "interrupt", "interrupt", priority=True, show=False),
        Binding("ctrl+c", "ctrl_c", "clear / interrupt / quit", priority=True, show=False),
        Binding("ctrl+d", "quit_now", "quit", priority=True, show=False),
        Binding("pageup", "page(-1)", show=False, priority=True),
        Binding("pagedown", "page(1)", show=False, priority=True),
        Binding("ctrl+home", "earliest", show=False, priority=True),
        Binding("ctrl+end", "latest", show=False, priority=True),
        Binding("ctrl+o", "toggle_card", show=False, priority=True),
        Binding("ctrl+y", "copy_last", show=False, priority=True),
        Binding("ctrl+t", "toggle_panel", show=False, priority=True),
        Binding("shift+tab", "to_cards", show=False, priority=True),
        Binding("ctrl+r", "retry", show=False),
    ]

    def __init__(self, config: Config | None, store: EventStore | None, workspace: Path, *,
                 session_id: str | None = None, provider: str | None = None,
                 model: str | None = None, mode: str | None = None, problem: str = "",
                 config_path: Path | None = None,
                 link_factory: LinkFactory | None = None, guard_s: float = GUARD_S,
                 clock: Callable[[], float] = time.monotonic,
                 history: PromptHistory | None = None) -> None:
        super().__init__()
        self.config = config
        self.store = store
        self.workspace = workspace
        self.options: dict[str, Any] = {"provider": provider, "model": model, "mode": mode,
                                        "session_id": session_id, "config_path": config_path}
        self.problem = problem
        self.link_factory: LinkFactory = link_factory or AgentLink
        self.guard_s = guard_s
        self.clock = clock
        self.deltas = DeltaBuffer()
        self.sink: Sink = AppSink(self, self.deltas)
        self.link: AgentLink | None = None
        self.info: LinkInfo | None = None
        self.preparing = ""  # the model being reached, before the agent has started
        self.running = False
        self.state = "starting"
        self.view = EventMap(self)  # the session's events -> the transcript's entries
        self.commands = SlashCommands(self)
        self.queue: list[str] = []
        self.waiting: list[str] = []  # sent before the agent was ready: sent once it is
        self.approvals: list[PendingApproval] = []
        self.card: ApprovalCard | None = None
        self.panel_open = True
        self.history = history
        self._quit_armed_at: float | None = None
        self._suggestions: list[str] = []
        self._suggest_index = 0
        self._clock_timer: Timer | None = None
        self._forgot_seen = 0
        self._drawn_seen = 0
        self._beat = 0  # render-clock beats so far
        self._noted_models: set[str] = set()  # models whose demonstration note was said
        # Held, not queried: a timer that fires while the app shuts down finds them still
        # (a query then raised NoMatches out of run_test, now and then).
        self._transcript = Transcript(id="transcript")
        self._composer = Composer(id="composer")
        self.queue_view = Static("", id="queue")
        self.suggest_view = Static("", id="suggest")
        self.exit_code = 0

    # -- layout -------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            with Vertical(id="conversation"):
                yield self._transcript
                yield BelowMark("▼ new output below: End (on an empty message) or Ctrl+End to "
                                "follow", id="below")
            yield SidePanel("", id="panel")
        with Vertical(id="bottom"):
            yield self.queue_view
            yield self.suggest_view
            yield self._composer
            yield StatusLine("", id="status")

    @property
    def transcript(self) -> Transcript:
        return self._transcript

    @property
    def composer(self) -> Composer:
        return self._composer

    def on_mount(self) -> None:
        self._clock_timer = self.set_interval(1 / RENDER_HZ, self._tick, pause=True)
        self.set_interval(TRIM_EVERY_S, self._trim)
        self.composer.clock = self.clock
        self.composer.focus()
        self._layout_panel()
        if self.history is None:
            try:
                self.history = PromptHistory.for_workspace(self.workspace)
            except Exception as exc:  # never keep the TUI from opening
                self.history = PromptHistory(None)
                self.history.problem = f"prompt history unavailable ({exc})"
        if self.history.problem:
            self.note(self.history.problem)
        self._start()

    def on_resize(self, event: events.Resize) -> None:
        self._layout_panel()
        if self.card is not None:
            self.card.fit(self.size.height)

    def _layout_panel(self) -> None:
        panel = self.query_one(SidePanel)
        panel.display = self.panel_open and self.size.width >= 100 and bool(self.view.panel_items)
        self.show_status()

    def show_panel(self) -> None:
        """The todo list and plan changed: the side panel shows them (when there is room)."""
        self.query_one(SidePanel).show_items(self.view.panel_items)
        self._layout_panel()

    def on_transcript_unseen(self, msg: Transcript.Unseen) -> None:
        self.query_one(BelowMark).display = msg.unseen

    # -- the link -----------------------------------------------------------------------
    def _start(self) -> None:
        if self.problem:
            self._failed(self.problem)
            return
        self.state = "starting"
        self.show_status()
        self.link = self.link_factory(self.config, self.store, self.workspace, self.sink,
                                      **self.options)
        self.link.start()
        if self.link._config is not None:
            self.config = self.link._config

    def restart(self, **changes: Any) -> None:
        """Close the session's agent and start another (/new, /resume, Ctrl+R)."""
        if self.link is not None:
            if self.store is None and self.link._store is not None:
                self.store = self.link._store  # keep the log open across /new and /resume
                self.link._own_store = False
            if self.config is None:
                self.config = self.link._config
            self.link.close()
        self.options.update(changes)
        self.transcript.clear_entries()
        self.view.reset()  # the token count is the session's: a new one starts at 0
        self.running = False
        self.info = None
        self.show_panel()
        self._start()

    def on_link_preparing(self, msg: LinkPreparing) -> None:
        self.preparing = msg.model or msg.provider
        self.show_status()

    def on_link_waiting(self, msg: LinkWaiting) -> None:
        self.note(msg.text)  # e.g. the local model service starting on demand, and its log

    def on_link_started(self, msg: LinkStarted) -> None:
        self.info = msg.info
        self.options["session_id"] = msg.info.session_id
        self.state = "idle"
        history = self.link.history() if self.link is not None else []
        with self.transcript.bulk():  # a resumed session is re-rendered from its log
            for stored in history:
                self.view.event(stored.event, replay=True)
        for text, error in setup_notes(msg.info):
            self.note(text, error=error)
        if msg.info.model_note and msg.info.model not in self._noted_models:
            self._noted_models.add(msg.info.model)  # once per TUI session, not per /new
            self.transcript.add(NoticeEntry(msg.info.model_note, "warning"))
        fresh = not any(s.event.type == "user_message" for s in history)
        if msg.info.mode_chosen_by == "caller" and fresh:
            self.note(f"mode {msg.info.mode}, as --mode asked (the operator's policy stays the "
                      "ceiling)")
        if fresh:
            self.note(f"Session {msg.info.session_id} in {msg.info.workspace}. "
                      "Type a task and press Enter; /help lists the keys.")
        self.show_status()
        waiting, self.waiting = self.waiting, []
        for text in waiting:  # typed while the agent was starting: sent now, in order
            self.submit(text)

    def on_link_failed(self, msg: LinkFailed) -> None:
        self._failed(msg.message)

    def _failed(self, message: str) -> None:
        self.state = "not started"
        text = Text()
        text.append("Abhed could not start the agent\n\n", style="bold")
        text.append(plain(message))
        text.append("\n\nFix that (docs/providers.md and docs/configuration.md say how; "
                    "`abhed run` checks the same things), then press Ctrl+R to try again, "
                    "or Ctrl+D to quit.", style="dim")
        resumed = self.options.get("session_id")
        if resumed:  # Ctrl+R tries the same session again: say the way out if it is the problem
            text.append(f" When session {resumed} itself is the problem (another workspace's, "
                        "open in another abhed), /new starts a new session here instead.",
                        style="dim")
        self.transcript.add(NoticeEntry(text, "error"))
        if self.waiting:
            self.composer.text = "\n".join(self.waiting)
            self.waiting = []
            self.note("what you typed was not sent (the agent did not start); it is back in the "
                      "message box", error=True)
        self.show_status()

    def action_retry(self) -> None:
        if self.link is None or self.link.agent is None:
            self.config = None  # read config.json again: the fix is probably there
            self.problem = ""
            if self.link is not None:
                self.link._config = None
            self.restart()

    # -- events from the agent ---------------------------------------------------------
    def on_event_arrived(self, msg: EventArrived) -> None:
        self.view.events_handled += 1
        self.view.event(msg.stored.event, replay=False)

    # -- approvals ------------------------------------------------------------------------
    def on_approval_asked(self, msg: ApprovalAsked) -> None:
        self.approvals.append(msg.pending)
        self.view.card_waits(msg.pending, True)
        self._show_card()

    def _show_card(self) -> None:
        while self.approvals and self.approvals[0].answered:
            self.approvals.pop(0)
        if self.card is not None or not self.approvals:
            self.show_status()
            return
        pending = self.approvals[0]
        self.card = ApprovalCard(pending, asked_by=self.view.asked_by(pending), clock=self.clock,
                                 guard_s=self.guard_s)
        self.query_one("#bottom").mount(self.card, before=self.composer)
        self.card.fit(self.size.height)
        self.state = "waiting for your approval (Shift+Tab to answer)"
        self.show_status()

    def on_approval_card_answered(self, msg: ApprovalCard.Answered) -> None:
        self.view.card_waits(msg.pending, False)
        if self.approvals and self.approvals[0] is msg.pending:
            self.approvals.pop(0)
        self._close_card()
        self.state = "running"
        self._show_card()

    def on_approval_card_leave(self, msg: ApprovalCard.Leave) -> None:
        self.composer.focus()
        if msg.text:
            self.composer.insert(msg.text)

    def _close_card(self) -> None:
        if self.card is not None:
            had_focus = self.card.has_focus_within
            self.card.remove()
            self.card = None
            if had_focus or self.focused is None:
                self.composer.focus()

    def on_run_finished(self, msg: RunFinished) -> None:
        self.view.run_ended()
        self.running = False
        self.approvals.clear()
        self._close_card()
        if self._clock_timer is not None:
            self._clock_timer.pause()
        if msg.error:
            self.note(msg.error, error=True)
        self.state = "idle"
        late = self.link.late_steers() if self.link is not None else []
        if late:  # typed as the run ended: the model never read it, so it is the next prompt
            self.note(f"sent as the next prompt: the run ended before it read "
                      f"{'your steer' if len(late) == 1 else f'{len(late)} steers'}")
            self.queue.insert(0, "\n\n".join(late))
        if self.queue:
            self.submit(self.queue.pop(0))
        self.show_queue()
        self.show_status()

    # -- the render clock ---------------------------------------------------------------
    def _tick(self) -> None:
        """The render clock: streamed text into the transcript, unless a typed key is not on
        screen yet; then it waits a beat, so the key's frame draws the message box alone."""
        composer = self.composer
        self._beat += 1
        if composer.echo_pending or (composer.typing and self._beat % TYPING_EVERY):
            return
        self.view.tick()

    def _trim(self) -> None:
        """After a burst of drawing (lines forgotten, a long message drawn), and only while
        nothing streams, give the freed heap back to the system (tui._memory)."""
        t = self.transcript
        drawn = self.view.drawn_chars()
        burst = t.forgot > self._forgot_seen or drawn > self._drawn_seen + 20_000
        if self.view.live is not None or not burst:
            return
        self._forgot_seen, self._drawn_seen = t.forgot, drawn
        trim()

    # -- the status line and the queue ------------------------------------------------------
    def show_status(self) -> None:
        """Bring the status line up to date (free when nothing it shows changed)."""
        try:
            line = self.query_one(StatusLine)
        except NoMatches:
            return  # before the first frame
        line.show(self)

    def note(self, text: str, *, error: bool = False) -> None:
        self.transcript.add(NoticeEntry(text, "error" if error else "info"))

    # -- keys ------------------------------------------------------------------------------------
    def action_interrupt(self) -> None:
        if isinstance(self.screen, SessionPicker):
            self.screen.dismiss(None)
            return
        if self.card is not None and self.card.has_class("reason"):
            self.card.remove_class("reason")
            self.card.focus()
            return
        if self._suggestions:
            self._suggest([])
            return
        if self.running and self.link is not None and self.link.interrupt("Esc"):
            self.state = "interrupting"
            self.show_status()

    def action_ctrl_c(self) -> None:
        if isinstance(self.screen, SessionPicker):
            self.screen.dismiss(None)
            return
        if self.composer.text:
            self.composer.text = ""
            self._quit_armed_at = None
            return
        if self.running and self.link is not None:
            self.link.interrupt("Ctrl+C")
            self.state = "interrupting"
            self.show_status()
            return
        now = self.clock()
        if self._quit_armed_at is not None and now - self._quit_armed_at <= QUIT_WINDOW_S:
            self.exit(0)
            return
        self._quit_armed_at = now
        self.notify("press Ctrl+C again to quit (Ctrl+D quits at once)")

    def action_quit_now(self) -> None:
        self.exit(0)

    def action_page(self, direction: int) -> None:
        self.transcript.page(direction)

    def action_earliest(self) -> None:
        self.transcript.home()

    def action_latest(self) -> None:
        self.transcript.follow_end()

    def action_to_cards(self) -> None:
        """Shift+Tab: to the approval card when one waits, else to the conversation's cards."""
        if self.card is not None and not self.card.has_focus_within:
            self.card.focus()
            return
        t = self.transcript
        if t.has_focus or (self.card is not None and self.card.has_focus_within):
            self.composer.focus()
            return
        t.focus()
        if t.selected is None:
            t.move_selection(0)

    def on_transcript_leave(self, msg: Transcript.Leave) -> None:
        self.composer.focus()
        if msg.text:
            self.composer.insert(msg.text)

    def action_toggle_card(self) -> None:
        t = self.transcript
        card = t.selected
        if card is None:
            cards = [e for e in t.entries[-200:] if isinstance(e, ToolEntry)]
            card = cards[-1] if cards else None
        if card is None:
            return
        card.toggle()
        t.changed(card)
        t.show_entry(card)

    def action_copy_last(self) -> None:
        if not self.view.last_answer:
            self.notify("nothing to copy yet")
            return

        def write(seq: str) -> None:
            driver = self._driver
            if driver is not None:
                driver.write(seq)
                driver.flush()

        self.note("copy: " + copy_text(self.view.last_answer, write))

    def action_toggle_panel(self) -> None:
        self.panel_open = not self.panel_open
        if not self.view.panel_items:
            self.note("the side panel shows the todo list and the plan once the agent records "
                      "them; there are none yet")
        self._layout_panel()

    async def action_quit(self) -> None:
        self.exit(0)

    def on_unmount(self) -> None:
        if self.link is not None:
            self.link.close(wait_s=5)


def tune_gc() -> None:
    """Fewer, cheaper collections while streaming, and none that never come.

    What exists at start-up is frozen out of collection, and young
    collections run every 5,000 allocations instead of 700; the older
    generations keep ordinary thresholds, so the cycles that dropped lines and
    rebuilt renderables leave behind are collected (a 100x threshold there
    once let browsing grow RSS for good).
    """
    import gc

    gc.freeze()
    gc.set_threshold(5_000, 10, 10)


def run_tui(config: Config | None, store: EventStore | None, workspace: Path, **options: Any) -> int:
    """Run the app full-screen until the person quits; then say how to come back."""
    tune_gc()
    app = AbhedApp(config, store, workspace, **options)
    result = app.run()
    if app.info is not None:
        import os
        import sys

        where = "" if Path(os.getcwd()).resolve() == workspace else f" -w {workspace}"
        print(f"Session {app.info.session_id}. Continue it with: abhed tui{where} --session "
              f"{app.info.session_id}  (or /resume in the TUI)", file=sys.stdout)
    return int(result or 0)
