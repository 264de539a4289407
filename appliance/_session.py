"""A session: one workspace, one event stream, what it knows about files, who listens.

The file ledger (which file was seen at which hash) is *derived* from the
session's observation events, never stored beside them, so it survives a
process restart and cannot disagree with the audit log.

Listeners hear every event right after it is persisted, exactly once, in log
order: the loop, the dispatcher and the approval path all append through the
session, so this is what ``abhed run --json`` prints, ``abhed rpc`` streams and
the TUI shows.  A subagent's session is *adopted* by its parent's, so a front
end that asked for children's events hears them too.

One process at a time works a session: opening or creating one *holds* it
(:meth:`Session.hold`), and another process that opens it for work is refused
with :class:`~appliance.SessionBusy`.  Without that, a second ``abhed run
--session`` took the first one's unfinished run for a crash and ended it while
it was still running, and an undo from another terminal put files back under a
live run.  The kernel lets go of the lock when its process ends, ``kill -9``
included, so resuming after a crash still works.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import re
import secrets
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ValidationError

from appliance._errors import EventLogError, SessionBusy, SessionNotFound
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


def _account() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid with no passwd entry (a container): the number is what there is
        return str(os.getuid())


def new_session_id() -> str:
    """Sortable by creation time, unique across processes."""
    return "s-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


#: Sessions this process holds: lock file -> [its descriptor, how many Session objects hold
#: it].  A flock belongs to one open file, so a second open of the same lock in this process
#: would refuse the process itself (rpc's undo beside its own agent); they share this one.
_HELD: dict[str, list[int]] = {}
_HELD_LOCK = threading.Lock()
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _lock_path(store: EventStore, session_id: str) -> str:
    """``STATE/locks/SESSION.lock`` beside the event log (a hash for an id unfit for a name)."""
    name = session_id if _PLAIN_ID.fullmatch(session_id) else hashlib.sha256(
        session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return os.path.join(os.path.dirname(os.path.abspath(store.path)), "locks", f"{name}.lock")


def _holder(fd: int) -> str:
    """Who holds the lock, as it wrote itself into the file (pid, command, since when)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(info['pid'])}, {str(info['command'])[:80]}, since {str(info['since'])[:40]}"
    except (OSError, ValueError, TypeError, KeyError):
        return "a process that did not say which"


def _command() -> str:
    """``abhed VERB``: enough to recognise the holder, never its arguments (a prompt)."""
    verb = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
    return "abhed " + verb[:40] if verb else "abhed"


def _let_go(path: str) -> None:
    with _HELD_LOCK:
        entry = _HELD.get(path)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _HELD[path]
            # Removed while still locked, so a session's lock file lives as long as some
            # process works it (one file per tool call once piled up in STATE/locks); a
            # process that opened it just before sees, once it has the lock, that the path
            # is no longer its file, and opens it again (Session.hold).
            try:
                os.unlink(path)
            except OSError:
                pass
            os.close(entry[0])  # the flock goes with the last descriptor


def _same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open at ``fd`` (not removed, not replaced)."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


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
        self._release: weakref.finalize[[str], Session] | None = None
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
                                 parent_call_id=parent[1] if parent else None,
                                 host=socket.gethostname(), account=_account())
        store.create_session(sid, workspace, started.ts)
        session = cls(store, sid, workspace)
        session.hold()  # before its first event: nobody may resume it while it is made
        session.append(started)
        return session

    @classmethod
    def open(cls, store: EventStore, session_id: str, workspace: str | None = None) -> Session:
        """Reopen a session to work on it (held: :meth:`hold`); its workspace must be the one
        given, if one is given."""
        info = store.session_info(session_id)
        if workspace is not None and os.path.realpath(workspace) != info["workspace"]:
            raise SessionNotFound(
                f"session {session_id} belongs to workspace {info['workspace']}, not {workspace}"
            )
        session = cls(store, session_id, info["workspace"])
        session.hold()
        return session

    def hold(self) -> None:
        """Take the session for this process, or raise :class:`SessionBusy` naming who has it.

        An advisory lock (``flock``) on ``STATE/locks/SESSION.lock``, held until
        :meth:`release` (or until this object is collected); the kernel drops it
        when the process ends, however it ends.  Readers (``sessions show``,
        export, verify) read the log without it.  Within one process every
        holder of a session shares the lock: its doors already take turns.
        """
        if self._release is not None and self._release.alive:
            return
        path = _lock_path(self.store, self.id)
        with _HELD_LOCK:
            entry = _HELD.get(path)
            if entry is None:
                fd = self._take_lock_file(path)
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": _command(),
                                          "since": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                 time.gmtime())}).encode(), 0)
                entry = _HELD[path] = [fd, 0]
            entry[1] += 1
        self._release = weakref.finalize(self, _let_go, path)

    def _take_lock_file(self, path: str) -> int:
        """The session's lock file, open and flocked by this process; :class:`SessionBusy`
        naming the holder when another process has it.  A file removed (its last holder
        let go) or replaced between the open and the lock is not the lock: opened again."""
        for _ in range(100):
            try:
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise EventLogError(f"cannot take session {self.id} for work: {path}: "
                                    f"{exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise SessionBusy(
                    f"session {self.id} is in use by another process ({holder}): two "
                    "processes working one session would each take the other's unfinished "
                    "run for a crash. Wait for it to end, or stop it (Ctrl-C, rpc abort or "
                    "shutdown, quit the TUI); undo there with rpc undo or the TUI's /undo; "
                    "or start a new session.") from None
            if _same_file(fd, path):
                return fd
            os.close(fd)
        raise EventLogError(f"cannot take session {self.id} for work: {path} kept changing "
                            "under this process (100 tries)")

    def release(self) -> None:
        """Let go of what :meth:`hold` took (once; a later call does nothing)."""
        if self._release is not None:
            self._release()
            self._release = None

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
