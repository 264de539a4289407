"""The Abhed TUI: a transcript, an approval card, a composer and a status line.

The app renders what the agent records and relays what the person decides;
it decides nothing itself.  It talks to the appliance only through
:class:`tui._link.AgentLink` (``link_factory`` swaps it in tests).

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
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Static

if TYPE_CHECKING:  # imported on the link's start thread, after the first frame
    from appliance import Config
    from appliance.events import EventStore
from tui._approval import GUARD_S, ApprovalCard
from tui._commands import COMMANDS, UNAVAILABLE, complete_command, help_text
from tui._composer import MAX_PROMPT_CHARS, Composer
from tui._copy import copy_text
from tui._export import export_markdown
from tui._link import MODES, AgentLink, LinkInfo, PendingApproval, Sink
from tui._messages import (
    ApprovalAsked,
    AppSink,
    EventArrived,
    LinkFailed,
    LinkStarted,
    RunFinished,
)
from tui._render import plain
from tui._screens import SessionPicker
from tui._stream import DeltaBuffer
from tui._transcript import Entry, Transcript
from tui._widgets import AssistantBlock, ToolCard, record_result

__all__ = ["AbhedApp", "LinkFactory", "run_tui", "tune_gc"]

RENDER_HZ = 25
QUIT_WINDOW_S = 2.0
LinkFactory = Callable[..., AgentLink]


class StatusLine(Static):
    DEFAULT_CSS = "StatusLine { height: 1; padding: 0 1; background: $panel; }"


class SidePanel(Static):
    DEFAULT_CSS = """
    SidePanel { width: 34; height: 1fr; border-left: solid $panel-lighten-2; padding: 0 1; }
    """


class AbhedApp(App[int]):
    """One workspace, one session at a time."""

    TITLE = "Abhed"
    CSS = """
    Screen { layout: vertical; }
    #main { height: 1fr; }
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
        Binding("ctrl+r", "retry", show=False),
    ]

    def __init__(self, config: Config | None, store: EventStore | None, workspace: Path, *,
                 session_id: str | None = None, provider: str | None = None,
                 model: str | None = None, mode: str | None = None, problem: str = "",
                 config_path: Path | None = None,
                 link_factory: LinkFactory | None = None, guard_s: float = GUARD_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
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
        self.running = False
        self.state = "starting"
        self.live: Entry | None = None
        self.cards: dict[str, Entry] = {}
        self.queue: list[str] = []
        self.approvals: list[PendingApproval] = []
        self.card: ApprovalCard | None = None
        self.tokens = 0
        self.context_tokens = 0
        self.last_answer = ""
        self.panel_items: dict[str, str] = {}
        self.current_item = ""
        self.panel_open = True
        self._quit_armed_at: float | None = None
        self._suggestions: list[str] = []
        self._suggest_index = 0
        self._clock_timer: Timer | None = None
        self._lead = ""
        self._events_handled = 0  # events from the sink handled so far (orders the deltas)
        self.exit_code = 0

    # -- layout -------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield Transcript(id="transcript")
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
        self.composer.focus()
        self._layout_panel()
        self._start()

    def on_resize(self) -> None:
        self._layout_panel()

    def _layout_panel(self) -> None:
        panel = self.query_one(SidePanel)
        panel.display = self.panel_open and self.size.width >= 100 and bool(self.panel_items)
        self._status()

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
        self.live = None
        self.running = False
        self._start()

    def on_link_started(self, msg: LinkStarted) -> None:
        self.info = msg.info
        self.options["session_id"] = msg.info.session_id
        self.state = "idle"
        history = self.link.history() if self.link is not None else []
        # A resumed session is re-rendered from its log; only the newest window is mounted.
        self.transcript.deferred = True
        for stored in history:
            self._event(stored.event, replay=True)
        self.transcript.replayed()
        for notice in msg.info.notices:  # what set-up refused or degraded, in its own words
            self.note(f"notice: {notice}", error=True)
        fresh = not any(s.event.type == "user_message" for s in history)
        if msg.info.mode_chosen_by == "caller" and fresh:
            self.note(f"mode {msg.info.mode}, as --mode asked (the operator's policy stays the "
                      "ceiling)")
        if not any(s.event.type == "user_message" for s in history):
            self.note(f"Session {msg.info.session_id} in {msg.info.workspace}. "
                      "Type a task and press Enter; /help lists the keys.")
        self._status()

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
        self.transcript.add(Entry("notice", {"text": text, "error": True}))
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

    def _event(self, e: Any, *, replay: bool) -> None:
        kind = e.type
        if kind == "user_message":
            self.transcript.add(Entry("user", {"text": e.text, "kind": e.kind}))
        elif kind == "model_turn":
            self._drain()
            self._lead = ""
            if self.live is not None:
                widget = self.live.widget
                if isinstance(widget, AssistantBlock):
                    widget.finish(e.text)
                else:
                    self.live.data.update(text=e.text, finished=True)
                self.live = None
            elif e.text:
                self.transcript.add(Entry("assistant", {"text": e.text, "finished": True}))
            if e.text:
                self.last_answer = e.text
            if e.usage is not None:
                self.tokens += e.usage.prompt_tokens + e.usage.completion_tokens
                self.context_tokens = e.usage.prompt_tokens + e.usage.completion_tokens
        elif kind == "action":
            entry = self.transcript.add(Entry("tool", {"call_id": e.call_id, "tool": e.tool,
                                                       "args": e.args}))
            self.cards[e.call_id] = entry
            if not replay:
                self.state = f"running {e.tool}"
        elif kind == "observation":
            found = self.cards.get(e.call_id)
            entry = found if found is not None else self.transcript.add(Entry("tool", {"call_id": e.call_id, "tool": e.tool,
                                                           "args": {}}))
            r = e.result
            code = r.error.code if r.error else ""
            if isinstance(entry.widget, ToolCard):
                entry.widget.set_result(r.ok, r.content, code, e.duration_ms, r.details)
            else:
                record_result(entry.data, r.ok, r.content, code, e.duration_ms, r.details)
            if not replay:
                self.state = "thinking"
        elif kind == "approval":
            if e.decided_by not in ("auto",):
                mark = "allowed" if e.decision == "allow" else "denied"
                self.note(f"{e.tool}: {mark} by {e.decided_by}" + (f" ({e.reason})" if e.reason
                                                                    else ""))
        elif kind == "policy_rule_added":
            rule = e.rule if isinstance(e.rule, dict) else {}
            shown = " ".join(f"{k}={v}" for k, v in rule.items() if v not in (None, "", {}))
            self.note(f"stored for this session: {shown or e.rule}")
        elif kind == "run_started":
            if not replay:
                self.state = "thinking"
        elif kind == "run_ended":
            self.state = "idle"
            if e.reason != "done":
                self.note(f"run ended: {e.reason}: {e.message}", error=e.reason != "interrupted")
        elif kind == "extension_died":
            self.note(f"extension {e.extension} stopped answering ({e.reason}); it is skipped "
                      "for the rest of the session", error=True)
        elif kind in ("todo_updated", "plan_updated"):
            self._panel(kind, e)
        elif kind in ("task_started", "task_ended"):
            self._subagent(kind, e)
        elif kind == "compacted":
            self.note(f"conversation compacted ({e.trigger}, {e.strategy}): "
                      f"{e.tokens_before:,} tokens before")
        self._status()

    def _subagent(self, kind: str, e: Any) -> None:
        """A subagent's start and end nest inside the card of the task call that spawned it."""
        entry = self.cards.get(e.call_id)
        if entry is None:
            entry = self.transcript.add(Entry("tool", {"call_id": e.call_id, "tool": "task",
                                                       "args": {}}))
            self.cards[e.call_id] = entry
        sub = entry.data.setdefault("subagent", {})
        if kind == "task_started":
            sub.update(agent_type=e.agent_type, description=e.description,
                       child=e.child_session_id, reserved=dict(e.reserved or {}), status="running")
        else:
            sub.update(child=e.child_session_id, status=e.status, spent=dict(e.spent or {}),
                       files=list(e.files_changed or []), commands=list(e.commands or []))
        if isinstance(entry.widget, ToolCard):
            entry.widget.refresh_card()

    def _panel(self, kind: str, e: Any) -> None:
        """todo_updated and plan_updated drive the side panel; the status line shows the live item."""
        marks = {"done": "☑", "completed": "☑", "in_progress": "▶", "skipped": "⊘"}
        lines: list[str] = []
        if kind == "plan_updated":
            title = "Plan: " + str(getattr(e, "title", "") or "")
            for step in getattr(e, "steps", []) or []:
                lines.append(f"{marks.get(str(step.status), '☐')} {step.step}")
            if getattr(e, "notes", ""):
                lines.append(str(e.notes))
        else:
            title = "Todo"
            self.current_item = ""
            for item in getattr(e, "items", []) or []:
                status = str(getattr(item, "status", ""))
                content = str(getattr(item, "content", item))
                lines.append(f"{marks.get(status, '☐')} {content}")
                if status == "in_progress":
                    self.current_item = content
        key = "plan" if kind == "plan_updated" else "todo"
        self.panel_items[key] = title + "\n" + ("\n".join(lines) if lines else "(empty)")
        self._render_panel()

    def _render_panel(self) -> None:
        out = Text()
        for body in self.panel_items.values():
            head, _, rest = body.partition("\n")
            out.append(plain(head + "\n", "bold"))
            out.append(plain(rest + "\n\n"))
        self.query_one(SidePanel).update(out)
        self._layout_panel()

    def on_approval_asked(self, msg: ApprovalAsked) -> None:
        self.approvals.append(msg.pending)
        self._show_card()

    def _show_card(self) -> None:
        while self.approvals and self.approvals[0].answered:
            self.approvals.pop(0)
        if self.card is not None or not self.approvals:
            self._status()
            return
        self.card = ApprovalCard(self.approvals[0], clock=self.clock, guard_s=self.guard_s)
        self.query_one("#bottom").mount(self.card, before=self.composer)
        self.card.focus()
        self.state = "waiting for your approval"
        self._status()

    def on_approval_card_answered(self, msg: ApprovalCard.Answered) -> None:
        if self.approvals and self.approvals[0] is msg.pending:
            self.approvals.pop(0)
        self._close_card()
        self.state = "running"
        self._show_card()

    def _close_card(self) -> None:
        if self.card is not None:
            self.card.remove()
            self.card = None
            self.composer.focus()

    def on_run_finished(self, msg: RunFinished) -> None:
        self._drain()
        if self.live is not None:
            if isinstance(self.live.widget, AssistantBlock):
                self.live.widget.finish()
            self.live = None
        self.running = False
        self.approvals.clear()
        self._close_card()
        if self._clock_timer is not None:
            self._clock_timer.pause()
        if msg.error:
            self.note(msg.error, error=True)
        self.state = "idle"
        if self.queue:
            self._send_prompt(self.queue.pop(0))
        self._queue_view()
        self._status()

    # -- the render clock ---------------------------------------------------------------
    def _tick(self) -> None:
        self._drain()
        if self.live is not None and isinstance(self.live.widget, AssistantBlock):
            self.live.widget.tick()

    def _drain(self) -> None:
        text, tool = self.deltas.drain(self._events_handled)
        if tool:
            self.state = f"writing a {tool} call"
            self._status()
        if not text:
            return
        if self.live is None:
            # A reply that so far is only whitespace (a call's preamble) gets no block yet.
            self._lead += text
            if not self._lead.strip():
                return
            text, self._lead = self._lead, ""
            self.live = self.transcript.add(Entry("assistant", {"text": "", "finished": False}))
            self.state = "answering"
            self._status()
        widget = self.live.widget
        if isinstance(widget, AssistantBlock):
            widget.feed(text)
        else:
            self.live.data["text"] = self.live.data.get("text", "") + text

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
        if self.queue:
            t.append(f" · {len(self.queue)} queued")
        if self.current_item:
            t.append(plain(f" · ▶ {self.current_item[:40]}"))
        t.append(" · ")
        busy = self.running or self.state == "starting"
        t.append(("● " if busy else "○ ") + self.state, style="yellow" if busy else "green")
        line.update(t)

    def _queue_view(self) -> None:
        view = self.query_one("#queue", Static)
        view.display = bool(self.queue)
        view.update(plain("\n".join(f"queued {i + 1}: {q.splitlines()[0][:100] if q else ''}"
                                    for i, q in enumerate(self.queue))
                          + "\n(Up on an empty input takes the last one back to edit)"))

    def note(self, text: str, *, error: bool = False) -> None:
        self.transcript.add(Entry("notice", {"text": text, "error": error}))

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
        if self.running:
            if self.link is not None and self.link.steer(text):
                self.notify("steering: the message reaches the model before its next step")
            else:
                self.queue.append(text)
                self._queue_view()
            return
        self._send_prompt(text)

    def _send_prompt(self, text: str) -> None:
        if self.link is None or self.link.agent is None:
            self.note("the agent is not running, so the message was not sent; see above why, "
                      "or press Ctrl+R to retry", error=True)
            self.composer.text = text
            return
        if self.link.submit(text):
            self.running = True
            self.state = "thinking"
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
                if problem:
                    self.call_from_thread(self.note, problem)

            problem = self.link.compact(done)
            if problem:
                self.note(problem, error=True)
        elif name == "/undo":
            if self.link is not None:
                self.note(self.link.undo())
        elif name == "/todo":
            if not self.panel_items:
                self.note("no todo list or plan yet: the agent records them with its todo and "
                          "plan tools, and the side panel (Ctrl+T) shows them live")
            else:
                self.note("\n\n".join(self.panel_items.values()))
        elif name == "/copy":
            self.action_copy_last()

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
        if arg:
            self._restart(session_id=arg)
            return
        sessions = self.link.sessions()
        if not sessions:
            self.note("no recorded sessions yet")
            return

        def picked(session_id: str | None) -> None:
            if session_id:
                self._restart(session_id=session_id)

        self.push_screen(SessionPicker(sessions), picked)

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
        self.note(f"exported {n} messages to {target}")

    def _sandbox(self) -> None:
        if self.info is None:
            self.note("the agent has not started, so there is no sandbox yet")
            return
        if self.info.sandbox == "host":
            self.note("sandbox: host. UNSANDBOXED: the operator chose to run bash commands "
                      "directly on this machine, as you.", error=True)
        else:
            self.note(f"sandbox: {self.info.sandbox} (`abhed sandbox check` compares the backends)")

    # -- keys ------------------------------------------------------------------------------------
    def action_interrupt(self) -> None:
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
        t = self.transcript
        if direction < 0:
            if t.scroll_y <= 0:
                t.show_earlier()
            t.scroll_page_up(animate=False)
        else:
            t.scroll_page_down(animate=False)

    def action_earliest(self) -> None:
        while self.transcript.show_earlier():
            pass
        self.transcript.scroll_home(animate=False)

    def action_latest(self) -> None:
        self.transcript.show_latest()

    def action_toggle_card(self) -> None:
        focused = self.focused
        if isinstance(focused, ToolCard):
            focused.action_toggle_card()
            return
        for entry in reversed(self.transcript.mounted()):
            if isinstance(entry.widget, ToolCard):
                entry.widget.action_toggle_card()
                entry.widget.scroll_visible()
                return

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


def tune_gc() -> None:
    """Fewer, cheaper collections while streaming.

    The collector's full passes over Textual's many long-lived objects were
    the tallest frames in benchmarks/tui/frames.py (p95 halved without them):
    what exists at start-up is frozen out of collection, and young
    collections run every 20,000 allocations instead of 700.
    """
    import gc

    gc.freeze()
    gc.set_threshold(20_000, 50, 100)


def run_tui(config: Config | None, store: EventStore | None, workspace: Path, **options: Any) -> int:
    """Run the app full-screen until the person quits; returns the exit code."""
    tune_gc()
    app = AbhedApp(config, store, workspace, **options)
    result = app.run()
    return int(result or 0)
