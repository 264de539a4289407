"""A session: one workspace, one event stream, what it knows about files, who listens.

The file ledger (which file was seen at which hash) is *derived* from the
session's observation events, never stored beside them, so it survives a
process restart and cannot disagree with the audit log.

Listeners hear every event right after it is persisted, exactly once, in log
order: the loop, the dispatcher and the approval path all append through the
session, so this is what ``abhed run --json`` prints, ``abhed rpc`` streams and
the TUI shows.  A subagent's session is *adopted* by its parent's, so a front
end that asked for children's events hears them too.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ValidationError

from appliance._errors import EventLogError, SessionNotFound
from appliance.events import (
    ActionEvent,
    ArtifactRef,
    Event,
    EventStore,
    ObservationEvent,
    PlanUpdated,
    SessionStarted,
    StoredEvent,
    TodoUpdated,
)
from tools import ToolResult, note_file_state

__all__ = ["Session", "new_session_id"]


def new_session_id() -> str:
    """Sortable by creation time, unique across processes."""
    return "s-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def _artifact_refs(result: ToolResult) -> list[ArtifactRef]:
    """The blobs a result says it kept, as the observation records them (by digest)."""
    refs: list[ArtifactRef] = []
    raw = result.details.get("artifacts")
    for item in raw if isinstance(raw, list) else []:
        try:
            refs.append(ArtifactRef(sha256=item["sha256"], bytes=item["bytes"], kind=item["kind"],
                                    source=item.get("source", "")))
        except (KeyError, TypeError, ValidationError):
            continue  # not ours (an extension's details): nothing to record
    return refs


class Session:
    """Appends events for one session, keeps the derived file ledger current, tells listeners."""

    def __init__(self, store: EventStore, session_id: str, workspace: str) -> None:
        self.store = store
        self.id = session_id
        self.workspace = workspace
        # What redaction learned in this session's earlier processes binds this one too.
        store.learned.recall(session_id, store.redactor)
        self._hashes: dict[str, str] = {}
        self._memory: dict[str, Any] = {}  # "todo" / "plan": as the last accepted call left it
        self._listeners: list[Callable[[StoredEvent], None]] = []
        self._child_listeners: list[Callable[[StoredEvent], None]] = []
        # Threads append at once (parallel subagents relay into their parent's
        # listeners): one lock keeps each event's persist-then-notify together.
        self._append_lock = threading.Lock()
        for stored in store.events(session_id, types=("observation", "todo_updated", "plan_updated")):
            self._fold(stored.event)

    @classmethod
    def create(cls, store: EventStore, workspace: str, *, version: str = "",
               settings: dict[str, object] | None = None, session_id: str | None = None,
               parent: tuple[str, str] | None = None) -> Session:
        """A new session; ``parent`` is (session id, task call id) for a subagent's."""
        sid = session_id or new_session_id()
        started = SessionStarted(session_id=sid, workspace=workspace, abhed_version=version,
                                 settings=settings or {},
                                 parent_session_id=parent[0] if parent else None,
                                 parent_call_id=parent[1] if parent else None)
        store.create_session(sid, workspace, started.ts)
        store.append(started)
        return cls(store, sid, workspace)

    @classmethod
    def open(cls, store: EventStore, session_id: str, workspace: str | None = None) -> Session:
        """Reopen a session; its workspace must be the one given, if one is given."""
        info = store.session_info(session_id)
        if workspace is not None and os.path.realpath(workspace) != info["workspace"]:
            raise SessionNotFound(
                f"session {session_id} belongs to workspace {info['workspace']}, not {workspace}"
            )
        return cls(store, session_id, info["workspace"])

    def listen(self, fn: Callable[[StoredEvent], None], *, children: bool = False) -> None:
        """Call ``fn`` after each event; ``children``: subagents' events too (a front end's stream)."""
        self._listeners.append(fn)
        if children:
            self._child_listeners.append(fn)

    def adopt(self, child: Session) -> None:
        """Relay a subagent session's events to the listeners that asked for children's."""

        def relay(stored: StoredEvent) -> None:
            for fn in list(self._child_listeners):
                fn(stored)

        child.listen(relay, children=True)

    def append(self, event: Event) -> StoredEvent:
        if event.session_id != self.id:
            raise EventLogError(f"event for session {event.session_id} appended to {self.id}")
        with self._append_lock:
            stored = self.store.append(event)
            self._fold(event)
            for fn in list(self._listeners):
                fn(stored)
        return stored

    def _fold(self, event: Event) -> None:
        if isinstance(event, ObservationEvent):
            note_file_state(self._hashes, event.result)
        elif isinstance(event, TodoUpdated):
            self._memory["todo"] = [i.model_dump() for i in event.items]
        elif isinstance(event, PlanUpdated):
            self._memory["plan"] = {"title": event.title, "notes": event.notes,
                                    "steps": [s.model_dump() for s in event.steps]}

    def recalled(self, kind: Literal["todo", "plan"]) -> Any:
        """The todo list or plan as the last accepted call left it (``tools.todo.WorkingMemory``)."""
        return self._memory.get(kind)

    # FileLedger
    def seen_hash(self, path: str) -> str | None:
        return self._hashes.get(path)

    def record_call(self, call_id: str, tool: str, args: object, source: str) -> None:
        self.append(ActionEvent(session_id=self.id, call_id=call_id, tool=tool, args=args,
                                source=source))

    def record_result(self, call_id: str, tool: str, result: ToolResult, duration_ms: float, *,
                      approval_wait_ms: float = 0.0) -> None:
        self.append(ObservationEvent(session_id=self.id, call_id=call_id, tool=tool, result=result,
                                     duration_ms=duration_ms, approval_wait_ms=approval_wait_ms,
                                     artifacts=_artifact_refs(result)))
        # Working memory gets its own typed events, so a UI (and the history
        # fold) never has to parse a tool result to show the list.
        memory: Event | None = None
        if result.details.get("changed") is False:
            return  # the same list again: nothing to record or show
        try:
            if result.ok and tool == "todo" and isinstance(result.details.get("todo"), list):
                memory = TodoUpdated(session_id=self.id, call_id=call_id, items=result.details["todo"])
            elif result.ok and tool == "plan" and isinstance(result.details.get("plan"), dict):
                memory = PlanUpdated(session_id=self.id, call_id=call_id, **result.details["plan"])
        except (ValidationError, TypeError):
            memory = None  # an extension rewrote the result into something else: no list to show
        if memory is not None:
            self.append(memory)
