"""From the session's events and streamed text to the transcript's entries.

:class:`EventMap` is the one place that decides which entry an event
becomes (a prompt, a reply, a tool card, a note, a subagent's line inside its
task card, the side panel), in the words of ``appliance.events.show``.  It
also feeds the streamed reply (the render clock drains the delta buffer into
the live entry) and keeps what the entries imply: the cards by call id, the
token counts the status line shows, the last answer /copy copies.

It changes widgets only through the app's transcript, notes and status
line, on the UI thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui._entries import AssistantEntry, SubagentInfo, ToolEntry, UserEntry

if TYPE_CHECKING:
    from appliance.events import Event, PlanUpdated, TodoUpdated
    from tui._app import AbhedApp
    from tui._link import PendingApproval

__all__ = ["EventMap"]


class EventMap:
    """One session's events, mapped onto one app's transcript (reset by /new and /resume)."""

    def __init__(self, app: AbhedApp) -> None:
        self.app = app
        self.live: AssistantEntry | None = None  # the reply streaming now
        self.cards: dict[str, ToolEntry] = {}  # call id -> its card (this session's calls)
        self.subagents: dict[str, ToolEntry] = {}  # child session id -> its task card
        self.tokens = 0
        self.context_tokens = 0
        self.last_answer = ""
        self.panel_items: dict[str, str] = {}
        self.current_item = ""
        self.events_handled = 0  # events from the sink handled so far (orders the deltas)
        self._lead = ""
        self._last_second = 0

    def reset(self) -> None:
        """A new session starts: no cards, no stream, and a token count from 0."""
        self.cards.clear()
        self.subagents.clear()
        self.live = None
        self.tokens = self.context_tokens = 0
        self.panel_items.clear()
        self.current_item = ""

    # -- recorded events ----------------------------------------------------------------
    def event(self, e: Event, *, replay: bool) -> None:
        """Show one recorded event; ``replay``: a resumed session's history (no state changes)."""
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

        app = self.app
        transcript = app.transcript
        if app.info is not None and e.session_id != app.info.session_id:
            self._child_event(e)
            return
        match e:
            case UserMessage():
                transcript.add(UserEntry(e.text, e.kind))
            case ModelTurn():
                self._turn(e.text)
                if e.usage is not None:
                    self.tokens += e.usage.prompt_tokens + e.usage.completion_tokens
                    self.context_tokens = e.usage.prompt_tokens + e.usage.completion_tokens
            case ActionEvent():
                card = ToolEntry(e.call_id, e.tool, e.args, summary=call_summary(e.tool, e.args),
                                 clock=app.clock)
                self.cards[e.call_id] = card
                transcript.add(card)
                if not replay:
                    app.state = f"running {e.tool}"
            case ObservationEvent():
                found = self.cards.get(e.call_id)
                if found is None:
                    found = ToolEntry(e.call_id, e.tool, {}, clock=app.clock)
                    self.cards[e.call_id] = found
                    transcript.add(found)
                card = found
                diff = e.result.details.get("diff")
                card.finished(call_outcome(e), e.result.content,
                              diff if isinstance(diff, str) else None)
                transcript.changed(card)
                if not replay:
                    app.state = "thinking"
            case ApprovalEvent():
                if e.decided_by != "auto":
                    app.note(show(e, you="tui").title)
            case PolicyRuleAdded() | ExtensionDied() | Compacted() | UndoApplied():
                shown = show(e, you="tui")
                app.note(shown.title, error=shown.tone == "error")
            case RunStarted():
                if not replay:
                    app.state = "thinking"
            case RunEnded():
                app.state = "idle"
                if e.reason != "done":
                    app.note(show(e).title, error=e.reason != "interrupted")
            case TodoUpdated() | PlanUpdated():
                self._panel(e)
            case TaskStarted():
                card = self._task_card(e.call_id)
                card.subagent = SubagentInfo(agent_type=e.agent_type, description=e.description,
                                             child=e.child_session_id, reserved=dict(e.reserved))
                self.subagents[e.child_session_id] = card
                card.changed()
                transcript.changed(card)
            case TaskEnded():
                card = self._task_card(e.call_id)
                sub = card.subagent or SubagentInfo(child=e.child_session_id)
                sub.status, sub.spent = e.status, dict(e.spent)
                sub.files, sub.commands = list(e.files_changed), list(e.commands)
                card.subagent = sub
                card.changed()
                transcript.changed(card)
            case _:
                pass
        if not replay:
            app.show_status()

    def _turn(self, text: str) -> None:
        """A model turn was recorded: the streamed reply (if any) is finished with its text."""
        self.drain()
        self._lead = ""
        if self.live is not None:
            self.live.finish(text)
            self.app.transcript.changed(self.live)
            self.live = None
        elif text:
            self.app.transcript.add(AssistantEntry(text))
        if text:
            self.last_answer = text

    def _task_card(self, call_id: str) -> ToolEntry:
        card = self.cards.get(call_id)
        if card is None:
            card = ToolEntry(call_id, "task", {}, clock=self.app.clock)
            self.cards[call_id] = card
            self.app.transcript.add(card)
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
        self.app.transcript.changed(card)

    def _panel(self, e: TodoUpdated | PlanUpdated) -> None:
        """todo_updated and plan_updated drive the side panel; the status line shows the live item."""
        from appliance.events import PlanUpdated, show

        shown = show(e)
        if isinstance(e, PlanUpdated):
            self.panel_items["plan"] = shown.title[0].upper() + shown.title[1:] + "\n" + shown.body
        else:
            self.current_item = next((i.content for i in e.items if i.status == "in_progress"), "")
            self.panel_items["todo"] = "Todo\n" + shown.body
        self.app.show_panel()

    # -- calls waiting, asked by whom ---------------------------------------------------------
    def card_waits(self, pending: PendingApproval, on: bool) -> None:
        """The call's card says it waits for the answer (not "running") until it comes."""
        card = self.cards.get(pending.call_id)
        if card is not None and card.status == "running":
            card.waiting(on)
            self.app.transcript.changed(card)

    def asked_by(self, p: PendingApproval) -> str:
        """"" for this session's own calls, else which subagent asks."""
        info = self.app.info
        if info is None or not p.session_id or p.session_id == info.session_id:
            return ""
        card = self.subagents.get(p.session_id)
        sub = card.subagent if card is not None else None
        if sub is None:
            return f"a subagent (session {p.session_id})"
        return f"subagent {sub.agent_type}: {sub.description[:60]}"

    def run_ended(self) -> None:
        """The run is over: the streamed reply is finished, and a call it never finished says so."""
        self.drain()
        transcript = self.app.transcript
        if self.live is not None:
            self.live.finish()
            transcript.changed(self.live)
            self.live = None
        for card in self.cards.values():
            if card.status == "running":
                card.status = "killed"
                card.changed()
                transcript.changed(card)

    # -- the stream, on the render clock -------------------------------------------------------
    def tick(self) -> None:
        """One beat of the render clock: streamed text in, and running calls show their age."""
        self.drain()
        live = self.live
        if live is not None:
            drew = live.tick()
            if not self.app.composer.typing:
                drew = live.polish() or drew  # pieces drawn plain get their colours
            if drew:
                self.app.transcript.changed(live)
        second = int(self.app.clock())
        if second != self._last_second:  # running calls show their age, once a second
            self._last_second = second
            for card in list(self.cards.values())[-20:]:
                if card.status == "running" or (card.subagent is not None
                                                and card.subagent.status == "running"):
                    card.changed()
                    self.app.transcript.changed(card)

    def drain(self) -> None:
        """Move what the provider streamed so far into the widgets (the reply, running outputs)."""
        app = self.app
        text, tool, outputs = app.deltas.drain(self.events_handled)
        for call_id, chunk in outputs:
            card = self.cards.get(call_id)
            if card is not None and card.status == "running":
                card.output_arrived(chunk)
                app.transcript.changed(card)
        if tool:
            app.state = f"writing a {tool} call"
            app.show_status()
        if not text:
            return
        if self.live is None:
            # A reply that so far is only whitespace (a call's preamble) gets no entry yet.
            self._lead += text
            if not self._lead.strip():
                return
            text, self._lead = self._lead, ""
            self.live = AssistantEntry(finished=False)
            app.transcript.add(self.live)
            app.state = "answering"
            app.show_status()
        self.live.feed(text)

    def drawn_chars(self) -> int:
        """Characters of the last few replies (the memory trim's measure of a drawing burst)."""
        entries = self.app.transcript.entries[-3:]
        return sum(len(e.body) for e in entries if isinstance(e, AssistantEntry))
