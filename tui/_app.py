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

import shlex
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
    from appliance.events import Event, EventStore
from tui._approval import GUARD_S, ApprovalCard
from tui._commands import COMMANDS, UNAVAILABLE, complete_command, help_text
from tui._composer import MAX_PROMPT_CHARS, Composer
from tui._copy import copy_text
from tui._entries import AssistantEntry, NoticeEntry, SubagentInfo, ToolEntry, UserEntry
from tui._export import export_markdown
from tui._history import PromptHistory
from tui._link import MODES, AgentLink, LinkInfo, PendingApproval, Sink
from tui._memory import trim
from tui._messages import (
    ApprovalAsked,
    AppSink,
    EventArrived,
    LinkFailed,
    LinkPreparing,
    LinkStarted,
    RunFinished,
)
from tui._render import plain
from tui._screens import SessionPicker
from tui._stream import DeltaBuffer
from tui._transcript import Transcript

__all__ = ["AbhedApp", "LinkFactory", "run_tui", "tune_gc"]

RENDER_HZ = 25
TRIM_EVERY_S = 2.0  # how often a quiet screen may give freed memory back (tui._memory)
QUIT_WINDOW_S = 2.0
LinkFactory = Callable[..., AgentLink]


class StatusLine(Static):
    DEFAULT_CSS = "StatusLine { height: 1; padding: 0 1; background: $panel; }"


class SidePanel(Static):
    DEFAULT_CSS = """
    SidePanel { width: 34; height: 1fr; border-left: solid $panel-lighten-2; padding: 0 1; }
    """


class BelowMark(Static):
    """"New output below" while the conversation is scrolled up."""

    DEFAULT_CSS = """
    BelowMark { height: 1; display: none; background: $warning 30%; color: $text;
                text-align: center; }
    """


class AbhedApp(App[int]):
    """One workspace, one session at a time."""

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
        self.live: AssistantEntry | None = None
        self.cards: dict[str, ToolEntry] = {}  # call id -> its card (this session's calls)
        self.subagents: dict[str, ToolEntry] = {}  # child session id -> its task card
        self.queue: list[str] = []
        self.waiting: list[str] = []  # sent before the agent was ready: sent once it is
        self.approvals: list[PendingApproval] = []
        self.card: ApprovalCard | None = None
        self.tokens = 0
        self.context_tokens = 0
        self.last_answer = ""
        self.panel_items: dict[str, str] = {}
        self.current_item = ""
        self.panel_open = True
        self.history = history
        self._quit_armed_at: float | None = None
        self._suggestions: list[str] = []
        self._suggest_index = 0
        self._clock_timer: Timer | None = None
        self._lead = ""
        self._events_handled = 0  # events from the sink handled so far (orders the deltas)
        self._last_second = 0
        self._forgot_seen = 0
        self._status_shown: tuple[str, tuple[Any, ...]] = ("", ())
        self._drawn_seen = 0
        self.exit_code = 0

    # -- layout -------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            with Vertical(id="conversation"):
                yield Transcript(id="transcript")
                yield BelowMark("▼ new output below: End (on an empty message) or Ctrl+End to "
                                "follow", id="below")
            yield SidePanel("", id="panel")
        with Vertical(id="bottom"):
            yield Static("", id="queue")
            yield Static("", id="suggest")
            yield Composer(id="composer")
            yield StatusLine("", id="status")

    @property
    def transcript(self) -> Transcript:
        return self.query_one(Transcript)

    @property
    def composer(self) -> Composer:
        return self.query_one(Composer)

    def on_mount(self) -> None:
        self._clock_timer = self.set_interval(1 / RENDER_HZ, self._tick, pause=True)
        self.set_interval(TRIM_EVERY_S, self._trim)
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
        panel.display = self.panel_open and self.size.width >= 100 and bool(self.panel_items)
        self._status()

    def on_transcript_unseen(self, msg: Transcript.Unseen) -> None:
        self.query_one(BelowMark).display = msg.unseen

    # -- the link -----------------------------------------------------------------------
    def _start(self) -> None:
        if self.problem:
            self._failed(self.problem)
            return
        self.state = "starting"
        self._status()
        self.link = self.link_factory(self.config, self.store, self.workspace, self.sink,
                                      **self.options)
        self.link.start()
        if self.link._config is not None:
            self.config = self.link._config

    def _restart(self, **changes: Any) -> None:
        if self.link is not None:
            if self.store is None and self.link._store is not None:
                self.store = self.link._store  # keep the log open across /new and /resume
                self.link._own_store = False
            if self.config is None:
                self.config = self.link._config
            self.link.close()
        self.options.update(changes)
        self.transcript.clear_entries()
        self.cards.clear()
        self.subagents.clear()
        self.live = None
        self.running = False
        self.info = None
        self.tokens = self.context_tokens = 0  # the count is the session's: a new one starts at 0
        self.panel_items.clear()
        self.current_item = ""
        self._render_panel()
        self._start()

    def on_link_preparing(self, msg: LinkPreparing) -> None:
        self.preparing = msg.model or msg.provider
        self._status()

    def on_link_started(self, msg: LinkStarted) -> None:
        self.info = msg.info
        self.options["session_id"] = msg.info.session_id
        self.state = "idle"
        history = self.link.history() if self.link is not None else []
        with self.transcript.bulk():  # a resumed session is re-rendered from its log
            for stored in history:
                self._event(stored.event, replay=True)
        self._notices(msg.info)
        fresh = not any(s.event.type == "user_message" for s in history)
        if msg.info.mode_chosen_by == "caller" and fresh:
            self.note(f"mode {msg.info.mode}, as --mode asked (the operator's policy stays the "
                      "ceiling)")
        if fresh:
            self.note(f"Session {msg.info.session_id} in {msg.info.workspace}. "
                      "Type a task and press Enter; /help lists the keys.")
        self._status()
        waiting, self.waiting = self.waiting, []
        for text in waiting:  # typed while the agent was starting: sent now, in order
            self._submit(text)

    def _notices(self, info: LinkInfo) -> None:
        """What set-up refused or degraded: a degradation said once, plainly; a loss each time.

        A sandbox fallback (bubblewrap instead of a microVM) and a note (a development
        checkout: no site settings) are said the first time they happen for this reason,
        then only by the status line and /sandbox; a tool that is missing (no sandbox at
        all, an MCP server refused, an extension dead) is said in red at every start,
        because something is wrong.
        """
        for notice in info.notices:
            if notice.degraded_only:
                if _first_time(notice.message):
                    again = "; /sandbox says it again" if notice.kind.startswith("sandbox") else ""
                    self.note(f"note: {notice.message} (said once{again})")
                continue
            self.note(notice.message, error=True)

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
        self.transcript.add(NoticeEntry(text, "error"))
        if self.waiting:
            self.composer.text = "\n".join(self.waiting)
            self.waiting = []
            self.note("what you typed was not sent (the agent did not start); it is back in the "
                      "message box", error=True)
        self._status()

    def action_retry(self) -> None:
        if self.link is None or self.link.agent is None:
            self.config = None  # read config.json again: the fix is probably there
            self.problem = ""
            if self.link is not None:
                self.link._config = None
            self._restart()

    # -- events from the agent ---------------------------------------------------------
    def on_event_arrived(self, msg: EventArrived) -> None:
        self._events_handled += 1
        self._event(msg.stored.event, replay=False)

    def _event(self, e: Event, *, replay: bool) -> None:
        from appliance.events import (
            ActionEvent,
            ApprovalEvent,
            Compacted,
            ExtensionDied,
            ModelTurn,
            ObservationEvent,
            PlanUpdated,
            PolicyRuleAdded,
            RunEnded,
            RunStarted,
            TaskEnded,
            TaskStarted,
            TodoUpdated,
            UndoApplied,
            UserMessage,
            call_outcome,
            call_summary,
            show,
        )

        if self.info is not None and e.session_id != self.info.session_id:
            self._child_event(e)
            return
        match e:
            case UserMessage():
                self.transcript.add(UserEntry(e.text, e.kind))
            case ModelTurn():
                self._turn(e.text)
                if e.usage is not None:
                    self.tokens += e.usage.prompt_tokens + e.usage.completion_tokens
                    self.context_tokens = e.usage.prompt_tokens + e.usage.completion_tokens
            case ActionEvent():
                card = ToolEntry(e.call_id, e.tool, e.args, summary=call_summary(e.tool, e.args),
                                 clock=self.clock)
                self.cards[e.call_id] = card
                self.transcript.add(card)
                if not replay:
                    self.state = f"running {e.tool}"
            case ObservationEvent():
                found = self.cards.get(e.call_id)
                if found is None:
                    found = ToolEntry(e.call_id, e.tool, {}, clock=self.clock)
                    self.cards[e.call_id] = found
                    self.transcript.add(found)
                card = found
                diff = e.result.details.get("diff")
                card.finished(call_outcome(e), e.result.content,
                              diff if isinstance(diff, str) else None)
                self.transcript.changed(card)
                if not replay:
                    self.state = "thinking"
            case ApprovalEvent():
                if e.decided_by != "auto":
                    self.note(show(e, you="tui").title)
            case PolicyRuleAdded() | ExtensionDied() | Compacted() | UndoApplied():
                shown = show(e, you="tui")
                self.note(shown.title, error=shown.tone == "error")
            case RunStarted():
                if not replay:
                    self.state = "thinking"
            case RunEnded():
                self.state = "idle"
                if e.reason != "done":
                    self.note(show(e).title, error=e.reason != "interrupted")
            case TodoUpdated() | PlanUpdated():
                self._panel(e)
            case TaskStarted():
                card = self._task_card(e.call_id)
                card.subagent = SubagentInfo(agent_type=e.agent_type, description=e.description,
                                             child=e.child_session_id, reserved=dict(e.reserved))
                self.subagents[e.child_session_id] = card
                card.changed()
                self.transcript.changed(card)
            case TaskEnded():
                card = self._task_card(e.call_id)
                sub = card.subagent or SubagentInfo(child=e.child_session_id)
                sub.status, sub.spent = e.status, dict(e.spent)
                sub.files, sub.commands = list(e.files_changed), list(e.commands)
                card.subagent = sub
                card.changed()
                self.transcript.changed(card)
            case _:
                pass
        if not replay:
            self._status()

    def _turn(self, text: str) -> None:
        """A model turn was recorded: the streamed reply (if any) is finished with its text."""
        self._drain()
        self._lead = ""
        if self.live is not None:
            self.live.finish(text)
            self.transcript.changed(self.live)
            self.live = None
        elif text:
            self.transcript.add(AssistantEntry(text))
        if text:
            self.last_answer = text

    def _task_card(self, call_id: str) -> ToolEntry:
        card = self.cards.get(call_id)
        if card is None:
            card = ToolEntry(call_id, "task", {}, clock=self.clock)
            self.cards[call_id] = card
            self.transcript.add(card)
        return card

    def _child_event(self, e: Event) -> None:
        """A subagent's own events: its calls show, live, inside its task card."""
        from appliance.events import ActionEvent, ObservationEvent, call_outcome, call_summary

        card = self.subagents.get(e.session_id)
        if card is None or card.subagent is None:
            return  # a grandchild, or a child whose start was not seen: its own log has it
        sub = card.subagent
        if isinstance(e, ActionEvent):
            sub.call(e.call_id, e.tool, call_summary(e.tool, e.args, width=100), "running")
        elif isinstance(e, ObservationEvent):
            sub.call(e.call_id, e.tool, "", call_outcome(e).status)
        else:
            return
        card.changed()
        self.transcript.changed(card)

    def _panel(self, e: Any) -> None:
        """todo_updated and plan_updated drive the side panel; the status line shows the live item."""
        from appliance.events import PlanUpdated, show

        shown = show(e)
        if isinstance(e, PlanUpdated):
            self.panel_items["plan"] = shown.title[0].upper() + shown.title[1:] + "\n" + shown.body
        else:
            self.current_item = next((i.content for i in e.items if i.status == "in_progress"), "")
            self.panel_items["todo"] = "Todo\n" + shown.body
        self._render_panel()

    def _render_panel(self) -> None:
        out = Text()
        for body in self.panel_items.values():
            head, _, rest = body.partition("\n")
            out.append(plain(head + "\n", "bold"))
            out.append(plain(rest + "\n\n"))
        self.query_one(SidePanel).update(out)
        self._layout_panel()

    # -- approvals ------------------------------------------------------------------------
    def on_approval_asked(self, msg: ApprovalAsked) -> None:
        self.approvals.append(msg.pending)
        self._card_waits(msg.pending, True)
        self._show_card()

    def _card_waits(self, pending: PendingApproval, on: bool) -> None:
        """The call's card says it waits for the answer (not "running") until it comes."""
        card = self.cards.get(pending.call_id)
        if card is not None and card.status == "running":
            card.waiting(on)
            self.transcript.changed(card)

    def _asked_by(self, p: PendingApproval) -> str:
        if self.info is None or not p.session_id or p.session_id == self.info.session_id:
            return ""
        card = self.subagents.get(p.session_id)
        sub = card.subagent if card is not None else None
        if sub is None:
            return f"a subagent (session {p.session_id})"
        return f"subagent {sub.agent_type}: {sub.description[:60]}"

    def _show_card(self) -> None:
        while self.approvals and self.approvals[0].answered:
            self.approvals.pop(0)
        if self.card is not None or not self.approvals:
            self._status()
            return
        pending = self.approvals[0]
        self.card = ApprovalCard(pending, asked_by=self._asked_by(pending), clock=self.clock,
                                 guard_s=self.guard_s)
        self.query_one("#bottom").mount(self.card, before=self.composer)
        self.card.fit(self.size.height)
        self.state = "waiting for your approval (Shift+Tab to answer)"
        self._status()

    def on_approval_card_answered(self, msg: ApprovalCard.Answered) -> None:
        self._card_waits(msg.pending, False)
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
        self._drain()
        if self.live is not None:
            self.live.finish()
            self.transcript.changed(self.live)
            self.live = None
        self.running = False
        self.approvals.clear()
        self._close_card()
        if self._clock_timer is not None:
            self._clock_timer.pause()
        for card in self.cards.values():  # a call the run never finished says so
            if card.status == "running":
                card.status = "killed"
                card.changed()
                self.transcript.changed(card)
        if msg.error:
            self.note(msg.error, error=True)
        self.state = "idle"
        late = self.link.late_steers() if self.link is not None else []
        if late:  # typed as the run ended: the model never read it, so it is the next prompt
            self.note(f"sent as the next prompt: the run ended before it read "
                      f"{'your steer' if len(late) == 1 else f'{len(late)} steers'}")
            self.queue.insert(0, "\n\n".join(late))
        if self.queue:
            self._submit(self.queue.pop(0))
        self._queue_view()
        self._status()

    # -- the render clock ---------------------------------------------------------------
    def _tick(self) -> None:
        self._drain()
        live = self.live
        if live is not None and live.tick():
            self.transcript.changed(live)
        second = int(self.clock())
        if second != self._last_second:  # running calls show their age, once a second
            self._last_second = second
            for card in list(self.cards.values())[-20:]:
                if card.status == "running" or (card.subagent is not None
                                                and card.subagent.status == "running"):
                    card.changed()
                    self.transcript.changed(card)

    def _drain(self) -> None:
        text, tool, outputs = self.deltas.drain(self._events_handled)
        for call_id, chunk in outputs:
            card = self.cards.get(call_id)
            if card is not None and card.status == "running":
                card.output_arrived(chunk)
                self.transcript.changed(card)
        if tool:
            self.state = f"writing a {tool} call"
            self._status()
        if not text:
            return
        if self.live is None:
            # A reply that so far is only whitespace (a call's preamble) gets no entry yet.
            self._lead += text
            if not self._lead.strip():
                return
            text, self._lead = self._lead, ""
            self.live = AssistantEntry(finished=False)
            self.transcript.add(self.live)
            self.state = "answering"
            self._status()
        self.live.feed(text)

    def _trim(self) -> None:
        """After a burst of drawing (lines forgotten, a long message drawn), and only while
        nothing streams, give the freed heap back to the system (tui._memory)."""
        t = self.transcript
        drawn = sum(len(e.body) for e in t.entries[-3:] if isinstance(e, AssistantEntry))
        burst = t.forgot > self._forgot_seen or drawn > self._drawn_seen + 20_000
        if self.live is not None or not burst:
            return
        self._forgot_seen, self._drawn_seen = t.forgot, drawn
        trim()

    # -- the status line -------------------------------------------------------------------
    def _status(self) -> None:
        try:
            line = self.query_one(StatusLine)
        except NoMatches:
            return  # before the first frame
        t = Text()
        info = self.info
        if info is not None:
            t.append(plain(info.model, "bold"))
            t.append(f" · {info.mode} · ")
            if info.sandbox == "host":
                t.append("UNSANDBOXED", style="bold white on red")
            else:
                t.append(plain(info.sandbox))
            if info.context_window:
                pct = 100 * self.context_tokens / info.context_window
                t.append(f" · ctx {pct:.0f}%", style="red" if pct > 90 else "")
            t.append(f" · {self.tokens:,} tok")
        else:
            model = self.preparing or str(self.options.get("model") or "")
            t.append(plain(model or "Abhed", "bold"))
        if self.queue:
            t.append(f" · {len(self.queue)} queued")
        if self.waiting:
            t.append(f" · {len(self.waiting)} to send once started")
        if self.current_item:
            t.append(plain(f" · ▶ {self.current_item[:40]}"))
        t.append(" · ")
        busy = self.running or self.state == "starting"
        state = self.state
        if state == "starting" and self.preparing:
            state = f"starting: reaching {self.preparing}"
        t.append(("● " if busy else "○ ") + state, style="yellow" if busy else "green")
        shown = (t.plain, tuple(t.spans))
        if shown != self._status_shown:  # an unchanged line is not drawn again
            self._status_shown = shown
            line.update(t)

    def _queue_view(self) -> None:
        view = self.query_one("#queue", Static)
        view.display = bool(self.queue)
        view.update(plain("\n".join(f"queued {i + 1}: {q.splitlines()[0][:100] if q else ''}"
                                    for i, q in enumerate(self.queue))
                          + "\n(Up on an empty input takes the last one back to edit)"))

    def note(self, text: str, *, error: bool = False) -> None:
        self.transcript.add(NoticeEntry(text, "error" if error else "info"))

    # -- the composer --------------------------------------------------------------------
    def on_composer_send(self, msg: Composer.Send) -> None:
        text = msg.text
        if self._suggestions and text.startswith("/") and " " not in text.strip() \
                and text.strip() not in COMMANDS:
            text = self._suggestions[self._suggest_index % len(self._suggestions)]
        if not text.strip():
            return
        self.composer.text = ""
        self._suggest([])
        if text.startswith("/"):
            self._command(text.strip())
            return
        if self.history is not None:
            self.history.add(text)
        if self.running:
            if self.link is not None and self.link.steer(text):
                self.notify("steering: the message reaches the model before its next step")
            else:
                self.queue.append(text)
                self._queue_view()
            return
        self._submit(text)

    def _submit(self, text: str) -> None:
        """Send a prompt: now, or once the agent has started (Enter during ● starting)."""
        if self.link is None or self.link.agent is None:
            if self.state == "starting":
                self.waiting.append(text)
                self.notify("the agent is starting; the message is sent as soon as it is ready")
                self._status()
                return
            self.note("the agent is not running, so the message was not sent; the error above "
                      "says why. Press Ctrl+R to try again once it is fixed", error=True)
            self.composer.text = text
            self.composer.move_cursor(self.composer.document.end)
            return
        if not self.link.submit(text):
            self.queue.insert(0, text)  # the agent is still busy: kept, sent after this turn
            self._queue_view()
        else:
            self.running = True
            self.state = "thinking"
            self.transcript.follow_end()  # a new prompt brings the conversation back into view
            if self._clock_timer is not None:
                self._clock_timer.resume()
        self._status()

    def on_composer_tabbed(self, msg: Composer.Tabbed) -> None:
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
            self._queue_view()
            self._status()

    def on_composer_up_on_empty(self, msg: Composer.UpOnEmpty) -> None:
        if self.queue:
            self.composer.text = self.queue.pop()
            self.composer.move_cursor(self.composer.document.end)
            self._queue_view()
            self._status()
            return
        self.on_composer_recall(Composer.Recall(-1))

    def on_composer_recall(self, msg: Composer.Recall) -> None:
        if self.history is None:
            return
        text = self.history.step(msg.step, self.composer.text)
        if text is None:
            return
        self.composer.text = text
        self.composer.move_cursor(self.composer.document.end)

    def on_composer_scroll(self, msg: Composer.Scroll) -> None:
        if msg.where == "home":
            self.transcript.home()
        else:
            self.transcript.follow_end()

    def on_composer_paste_refused(self, msg: Composer.PasteRefused) -> None:
        self.note(f"paste refused: it is {msg.size:,} characters and a message may hold "
                  f"{MAX_PROMPT_CHARS:,}; nothing was pasted. Put it in a file in the workspace "
                  "and ask the agent to read it.", error=True)

    def on_text_area_changed(self, event: Composer.Changed) -> None:
        text = self.composer.text
        if text.startswith("/") and "\n" not in text and " " not in text:
            self._suggest(complete_command(text))
        elif not text:
            self._suggest([])

    def _suggest(self, options: list[str]) -> None:
        if options != self._suggestions:
            self._suggest_index = 0
        self._suggestions = options
        view = self.query_one("#suggest", Static)
        view.display = bool(options)
        lines = [f"{o}  {COMMANDS.get(o, '')}" for o in options[:8]]
        view.update(plain("\n".join(lines) + ("\n(Tab completes)" if options else "")))

    # -- slash commands -------------------------------------------------------------------------
    def _command(self, line: str) -> None:
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        self.transcript.follow_end()  # a command's answer shows where one looks
        if name not in COMMANDS:
            self.note(f"no command {name!r}; commands: {', '.join(COMMANDS)}", error=True)
        elif name in UNAVAILABLE:
            self.note(UNAVAILABLE[name])
        elif name == "/help":
            self.note(help_text())
        elif name == "/quit":
            self.exit(0)
        elif name == "/mode":
            self._mode(arg)
        elif name == "/new":
            if self.running:
                self.note("a run is in progress; press Esc to interrupt it first", error=True)
                return
            self._restart(session_id=None)
        elif name == "/resume":
            self._resume(arg)
        elif name == "/export":
            self._export(arg)
        elif name == "/sandbox":
            self._sandbox()
        elif name == "/compact":
            if self.link is None:
                return

            def done(problem: str) -> None:
                self.call_from_thread(self._compacted, problem)

            problem = self.link.compact(done)
            if problem:
                self.note(problem, error=True)
        elif name in ("/undo", "/redo"):
            self._undo(arg, redo=name == "/redo")
        elif name == "/todo":
            if not self.panel_items:
                self.note("no todo list or plan yet: the agent records them with its todo and "
                          "plan tools, and the side panel (Ctrl+T) shows them live")
            else:
                self.note("\n\n".join(self.panel_items.values()))
        elif name == "/copy":
            self.action_copy_last()

    def _compacted(self, problem: str) -> None:
        if problem:
            self.note(problem)
        if self.queue and not self.running:  # sent while compacting: it goes now
            self._submit(self.queue.pop(0))
            self._queue_view()

    def _undo(self, arg: str, *, redo: bool = False) -> None:
        """/undo [N] [--skip PATH] [--overwrite PATH] and /redo [--skip/--overwrite PATH]."""
        if self.link is None:
            return
        name = "/redo" if redo else "/undo"
        usage = (f"{name} takes " + ("" if redo else "nothing (the newest run not undone yet) "
                                     "or a run number N (every run after run N; 0: all), and ")
                 + "--skip PATH or --overwrite PATH for a file it refused")
        try:
            words = shlex.split(arg)
        except ValueError as exc:
            self.note(f"{usage}; {exc}", error=True)
            return
        after: int | None = None
        skip: list[str] = []
        overwrite: list[str] = []
        while words:
            word = words.pop(0)
            if word in ("--skip", "--overwrite") and words:
                (skip if word == "--skip" else overwrite).append(words.pop(0))
            elif not redo and after is None and word.isdigit():
                after = int(word)
            else:
                self.note(f"{usage}, not {word!r}", error=True)
                return
        problem = self.link.undo(after, redo=redo, overwrite=tuple(overwrite), skip=tuple(skip))
        if problem:
            self.note(problem, error=True)

    def _mode(self, arg: str) -> None:
        current = self.info.mode if self.info else str(self.options.get("mode") or "?")
        if not arg:
            self.note(f"mode: {current}. /mode plan|ask|auto changes it (the operator's policy "
                      "still decides what runs)")
            return
        if arg not in MODES:
            self.note(f"/mode takes plan, ask or auto, not {arg!r}", error=True)
            return
        problem = self.link.set_mode(arg) if self.link is not None else "the agent is not running"
        if problem:
            self.note(problem, error=True)
            return
        self.options["mode"] = arg
        if self.link is not None and self.link.info is not None:
            self.info = self.link.info
        self.note(f"mode: {arg}")
        self._status()

    def _resume(self, arg: str) -> None:
        if self.running:
            self.note("a run is in progress; press Esc to interrupt it first", error=True)
            return
        if self.link is None:
            return
        current = self.info.session_id if self.info else None
        if arg:
            if arg == current:
                self.note(f"session {arg} is the one open")
                return
            self._restart(session_id=arg)
            return
        sessions = self.link.sessions()
        if not sessions:
            self.note("no recorded sessions yet")
            return

        def picked(session_id: str | None) -> None:
            if session_id and session_id != current:
                self._restart(session_id=session_id)
            elif session_id:
                self.note(f"session {session_id} is the one open")

        self.push_screen(SessionPicker(sessions, current=current), picked)

    def _export(self, arg: str) -> None:
        sid = self.info.session_id if self.info else "session"
        target = Path(arg).expanduser() if arg else self.workspace / f"abhed-{sid}.md"
        if not target.is_absolute():
            target = self.workspace / target
        try:
            n = export_markdown(self.transcript.entries, target, title=f"Abhed session {sid}")
        except OSError as exc:
            self.note(f"export failed: {exc}", error=True)
            return
        self.note(f"exported {n:,} messages to {target}")

    def _sandbox(self) -> None:
        if self.info is None:
            self.note("the agent has not started, so there is no sandbox yet")
            return
        if self.info.sandbox == "host":
            self.note("sandbox: host. UNSANDBOXED: the operator chose to run bash commands "
                      "directly on this machine, as you.", error=True)
            return
        self.note(f"sandbox: {self.info.sandbox} (`abhed sandbox check` compares the backends)")
        for notice in self.info.notices:
            if notice.kind.startswith("sandbox"):
                self.note(("note: " if notice.degraded_only else "") + notice.message,
                          error=not notice.degraded_only)

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
            self._status()

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
            self._status()
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
        if not self.last_answer:
            self.notify("nothing to copy yet")
            return

        def write(seq: str) -> None:
            driver = self._driver
            if driver is not None:
                driver.write(seq)
                driver.flush()

        self.note("copy: " + copy_text(self.last_answer, write))

    def action_toggle_panel(self) -> None:
        self.panel_open = not self.panel_open
        if not self.panel_items:
            self.note("the side panel shows the todo list and the plan once the agent records "
                      "them; there are none yet")
        self._layout_panel()

    async def action_quit(self) -> None:
        self.exit(0)

    def on_unmount(self) -> None:
        if self.link is not None:
            self.link.close(wait_s=5)


def _first_time(notice: str) -> bool:
    """Whether this notice is new in this terminal session (the rule is appliance.compose's)."""
    from appliance.compose import first_in_terminal

    return first_in_terminal(notice)


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
