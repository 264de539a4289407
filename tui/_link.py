"""The one seam between the TUI and the appliance: start an agent, feed the app, relay answers.

Everything the TUI does to the agent goes through :class:`AgentLink`, and
everything it calls here is what ``abhed rpc`` calls (``appliance.compose``'s
``load_config``, ``open_store`` and ``start_agent``, the
session's event listener, ``Agent.on_delta``, a ``CallbackApprover``,
``Agent.steer``, ``Agent.interrupt``), so the TUI holds no agent logic: a
decision policy makes, the TUI only shows and answers.

Threads: the agent runs on a worker thread; the :class:`Sink` methods are
called from that thread (and from the approver, which blocks the worker until
the person answers).  The app's sink only posts messages, which Textual makes
thread-safe, so no widget is touched off the UI thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the appliance is imported on the start thread, after the first frame
    from appliance.compose import Config
    from appliance.events import EventStore, StoredEvent
    from appliance.loop import Agent, RunOutcome
    from appliance.policy import Approval, ApprovalRequest
    from models import Delta

__all__ = ["AgentLink", "LinkInfo", "PendingApproval", "SetupNotice", "Sink"]

from foundation import MODES as MODES  # the leaf: appliance.policy would load the runtime first


@dataclass
class PendingApproval:
    """A call waiting on the person; :meth:`answer` releases the agent's thread.

    ``always_rules`` are the rules (as ``abhed policy explain`` describes them)
    that "allow always" would store; empty means policy does not offer it
    (destructive commands ask every time).
    """

    call_id: str
    tool: str
    args: Any
    reason: str
    commands: tuple[str, ...] = ()
    always_rules: tuple[str, ...] = ()
    decided_by: str = ""  # the rule or pattern that asks (as policy names it)
    session_id: str = ""  # the asking agent's session: a subagent's own, when one asks
    preview: str = ""  # for a file change: the unified diff against what is on disk
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    _answer: Approval | None = field(default=None, repr=False)

    def answer(self, decision: str, *, always: bool = False, reason: str = "") -> None:
        """Answer once; later answers are ignored (the first one already reached the agent)."""
        if self._done.is_set():
            return
        from appliance.policy import Approval, ScopedApproval

        if always and decision == "allow" and self.always_rules:
            self._answer = ScopedApproval("allow", "tui", reason, always=True)
        else:
            self._answer = Approval("allow" if decision == "allow" else "deny", "tui", reason)
        self._done.set()

    @property
    def answered(self) -> bool:
        return self._done.is_set()


class Sink(Protocol):
    """What the link tells the app.  Called from worker threads."""

    def event(self, stored: StoredEvent) -> None: ...

    def delta(self, delta: Delta) -> None: ...

    def approval(self, pending: PendingApproval) -> None: ...

    def preparing(self, provider: str, model: str) -> None: ...

    def waiting(self, text: str) -> None:
        """A sentence about a wait start-up must sit through (the local model service being
        started on demand, and its log), so the user is not left before a silent screen."""

    def progress(self, call_id: str, text: str) -> None: ...

    def started(self, info: LinkInfo) -> None: ...

    def failed(self, message: str) -> None: ...

    def run_ended(self, outcome: RunOutcome | None, error: str | None) -> None: ...


@dataclass(frozen=True)
class SetupNotice:
    """One thing start-up said: ``kind`` as the composition names it (``sandbox_fallback``,
    ``mcp_refused`` ...), ``level`` ``warning`` (something is missing or weaker) or ``note``."""

    kind: str
    level: str
    message: str

    @property
    def degraded_only(self) -> bool:
        """Nothing is missing: said once, plainly (a fallback that works, a note)."""
        return self.level == "note" or self.kind == "sandbox_fallback"


@dataclass(frozen=True)
class LinkInfo:
    """What the status line shows about the session, known once it has started."""

    session_id: str
    workspace: str
    provider: str
    model: str
    mode: str
    sandbox: str  # microvm, bwrap, host, or "none (why)"
    context_window: int | None
    tools: tuple[str, ...]
    mode_chosen_by: str = "operator"  # caller (--mode), operator (policy.mode) or default
    # what set-up refused or degraded (MCP server, extension, sandbox), or notes (a development
    # checkout): the app says a loss in red at every start, a note or a degradation once
    notices: tuple[SetupNotice, ...] = ()
    # what this model cannot do, when its catalog entry says it is a demonstration model
    # (model_note's rule); the app says it once per TUI session
    model_note: str = ""


class AgentLink:
    """Starts (or resumes) one session's agent and runs its prompts on a worker thread."""

    def __init__(self, config: Config | None, store: EventStore | None, workspace: Path, sink: Sink,
                 *, provider: str | None = None, model: str | None = None, mode: str | None = None,
                 session_id: str | None = None, config_path: Path | None = None) -> None:
        """``config`` and ``store`` None: loaded on the start thread (``config_path`` or
        ABHED_HOME's), so the first frame does not wait for the appliance's imports."""
        self._config = config
        self._store = store
        self.config_path = config_path
        self.workspace = workspace
        self.sink = sink
        self.provider_name = provider
        self.model = model
        self.mode = mode
        self.session_id = session_id
        self.agent: Agent | None = None
        self.info: LinkInfo | None = None
        self._worker: threading.Thread | None = None
        # set while a run or compaction works; cleared before the sink hears it ended, so the
        # app may start the next (a queued message) the moment it learns of the end
        self._active = threading.Event()
        self._pending: list[PendingApproval] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._own_store = False

    # -- starting ---------------------------------------------------------------
    def start(self) -> None:
        """Start the agent on a thread (it may probe the model server); the sink hears the result."""
        threading.Thread(target=self._start, name="abhed-tui-start", daemon=True).start()

    @property
    def config(self) -> Config:
        assert self._config is not None, "the link has not loaded its config yet"
        return self._config

    @property
    def store(self) -> EventStore:
        assert self._store is not None, "the link has not opened the event log yet"
        return self._store

    def _load(self) -> None:
        from appliance.compose import load_config, open_store

        if self._config is None:
            self._config = load_config(self.config_path)
        if self._store is None:
            # The operator's event-log settings (redaction, disk reserve, rotation, witness)
            # bind the TUI as every other door; a damaged log raises here, shown as one message.
            self._store = open_store(self._config, for_work=True)
            self._own_store = True

    def _start(self) -> None:
        from appliance import AbhedError
        from appliance.compose import choose_provider, start_agent
        from appliance.policy import CallbackApprover
        from models import ModelsError

        try:
            self._load()
        except AbhedError as exc:
            self.sink.failed(str(exc))
            return
        try:  # the status line names the model while the server is being reached
            pconf = choose_provider(self.config, self.provider_name)
            self.sink.preparing(pconf.name, self.model or pconf.model or "")
        except AbhedError:
            pass  # start_agent says what is wrong, in the words every door uses
        # None: the operator's policy.mode; a looser one is refused (appliance.policy.resolve_mode)
        if self.mode is not None and self.mode not in MODES:
            self.sink.failed(f"mode {self.mode!r} is not one of plan, ask, auto")
            return
        try:
            started = start_agent(
                self.config, self.store, self.workspace, door="abhed tui --mode",
                provider_name=self.provider_name, model=self.model, mode=self.mode,
                approver=CallbackApprover(self._ask), session_id=self.session_id,
                say=self.sink.waiting)
        except (AbhedError, ModelsError) as exc:
            self.sink.failed(str(exc))
            return
        except Exception as exc:
            self.sink.failed(f"{type(exc).__name__}: {exc}")
            return
        agent, provider = started.agent, started.provider
        self.mode = started.mode.mode
        if self._closed.is_set():
            agent.close()
            return
        self.agent = agent
        self.session_id = agent.session.id
        agent.on_delta = self.sink.delta
        agent.dispatcher.on_progress = self.sink.progress  # a running command's output
        sandbox = agent.dispatcher.ctx.sandbox
        problem = getattr(agent.dispatcher.ctx, "sandbox_problem", "")
        backend = str(getattr(sandbox, "backend", "")) if sandbox is not None else \
            f"none ({problem or 'no sandbox'})"
        self.info = LinkInfo(
            session_id=agent.session.id, workspace=agent.session.workspace, provider=provider.name,
            model=provider.model, mode=self.mode, sandbox=backend,
            context_window=started.context_tokens, tools=tuple(sorted(agent.tools)),
            mode_chosen_by=started.mode.chosen_by, model_note=self._model_note(provider.model),
            notices=tuple(SetupNotice(str(n.kind), n.level, n.message) for n in started.notices))
        self.sink.started(self.info)
        agent.session.listen(self.sink.event, children=True)  # subagents' calls show in their card

    def _model_note(self, model: str) -> str:
        """What a tiny demonstration model can and cannot do, or "" for any other model.

        The catalog entry decides: a probe bar with a *named* tool choice records that
        the model makes a valid tool call only when the request names the tool (the
        demo's SmolLM2 and the test suite's tiny model), which the agent loop never
        does; such a model answers from what it already knows instead of reading the
        workspace.  A model without a catalog entry (a remote endpoint) gets no note.
        """
        from appliance import AbhedError
        from appliance.compose import choose_provider, load_config_catalog
        from models import ModelsError

        try:
            pconf = choose_provider(self.config, self.provider_name)
            if not pconf.catalog_entry:
                return ""
            entry = load_config_catalog(self.config).get(pconf.catalog_entry)
        except (AbhedError, ModelsError, KeyError):
            return ""
        if entry.probe.tool_choice != "named":
            return ""
        from tui._notices import demo_model_note

        return demo_model_note(model)

    def history(self) -> list[StoredEvent]:
        """The session's recorded events so far (a resumed session is re-rendered from them)."""
        if self.session_id is None:
            return []
        return list(self.store.events(self.session_id))

    def sessions(self, *, every_workspace: bool = False) -> list[dict[str, Any]] | None:
        """This workspace's recorded sessions (``every_workspace``: all of them), newest first,
        with their first prompt (for /resume); None while the event log is not open.

        A session belongs to the workspace it was made in, compared as ``Session.open``
        compares them (real paths): only those can be resumed here.
        """
        if self._store is None:
            return None
        here = os.path.realpath(self.workspace)
        out: list[dict[str, Any]] = []
        for info in reversed(self._store.sessions()):
            if not every_workspace and info["workspace"] != here:
                continue
            first = ""
            for stored in self.store.events(info["id"], types=("user_message",)):
                first = str(getattr(stored.event, "text", ""))
                break
            out.append({**info, "first_prompt": first})
        return out

    def complete_paths(self, prefix: str, limit: int = 20) -> list[str]:
        """Workspace files whose relative path starts with ``prefix``, found by the glob tool.

        The glob tool's own walk, so its ignore rules (.gitignore, the
        operator's ignore list, node_modules ...) apply; nothing is recorded.
        """
        from tools import ToolContext, Workspace, run_tool
        from tools.glob import Glob

        if len(prefix) > 512 or "\x00" in prefix:
            return []
        safe = "".join(f"[{c}]" if c in "*?[]{}" else c for c in prefix)
        pattern = f"{safe}*" if "/" in prefix else f"**/{safe}*"
        ws = Workspace(str(self.workspace), self.config.tools.secret_paths)
        result = run_tool(Glob(), {"pattern": pattern}, ToolContext(workspace=ws, settings=self.config.tools))
        if not result.ok or not result.details.get("count"):
            return []
        root = ws.root.rstrip("/") + "/"
        paths = [p[len(root):] if p.startswith(root) else p
                 for p in result.content.splitlines() if not p.startswith("[")]
        return sorted(paths, key=lambda p: (not p.startswith(prefix), len(p), p))[:limit]

    # -- running -----------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._active.is_set()

    def submit(self, text: str) -> bool:
        """Start a run of ``text``; False when one is already running or no agent is up."""
        agent = self.agent
        if agent is None or self.busy:
            return False

        def work() -> None:
            outcome: RunOutcome | None = None
            error: str | None = None
            try:
                outcome = agent.run(text)
            except Exception as exc:
                error = f"the run failed: {type(exc).__name__}: {exc}"
            self._active.clear()
            self.sink.run_ended(outcome, error)

        self._active.set()
        self._worker = threading.Thread(target=work, name="abhed-tui-run", daemon=True)
        self._worker.start()
        return True

    def steer(self, text: str) -> bool:
        """Give the running run a message; it reaches the model before its next call."""
        if self.agent is None or not self.busy:
            return False
        self.agent.steer(text)
        return True

    def late_steers(self) -> list[str]:
        """Steers the ended run never read (sent after its last model call): the app sends
        them as the next prompt, so nothing typed is lost or held for a later run."""
        agent = self.agent
        return agent.take_steers() if agent is not None and not self.busy else []

    def interrupt(self, reason: str = "Esc") -> bool:
        """Stop the model stream and a running command; a waiting approval is denied."""
        agent = self.agent
        if agent is None or not self.busy:
            return False
        agent.interrupt(reason)
        with self._lock:
            pending, self._pending = self._pending, []
        for p in pending:
            p.answer("deny", reason=f"interrupted ({reason})")
        return True

    def set_mode(self, mode: str) -> str:
        """Switch mode between runs, as rpc ``mode`` does; returns "" or why not."""
        if self.agent is None:
            return "the agent is not running"
        if self.busy:
            return "a run is in progress; press Esc to interrupt it first"
        if mode not in MODES:
            return f"mode {mode!r} is not one of plan, ask, auto"
        from appliance.policy import ModeRefused

        try:
            self.mode = self.agent.set_mode(mode, door="the TUI's /mode").mode
        except ModeRefused as exc:
            return str(exc)
        if self.info is not None:
            from dataclasses import replace

            self.info = replace(self.info, mode=self.mode)
        return ""

    def compact(self, done: Callable[[str], None]) -> str:
        """Compact by hand between runs (rpc ``compact``), on a thread; ``done`` gets the outcome."""
        agent = self.agent
        if agent is None:
            return "the agent is not running"
        if self.busy:
            return "a run is in progress; compaction by hand happens between runs"

        def work() -> None:
            try:
                event = agent.compact("manual")
            except Exception as exc:
                self._active.clear()
                done(f"compaction failed: {type(exc).__name__}: {exc}")
                return
            self._active.clear()
            done("" if event is not None else "nothing to compact: no tool outputs are old enough "
                 "to mask and there is nothing to summarise yet")

        self._active.set()
        self._worker = threading.Thread(target=work, name="abhed-tui-compact", daemon=True)
        self._worker.start()
        return ""

    def undo(self, after_run: int | None = None, *, redo: bool = False,
             overwrite: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> str:
        """Undo the newest run not undone yet, or every run after run ``after_run``; with
        ``redo``, reverse the newest undo in effect (rpc ``undo``/``redo``, the same module).
        "" when done (the ``undo_applied`` event says what), else why not."""
        from appliance.sessions import UndoError
        from appliance.sessions import redo as redo_call
        from appliance.sessions import undo as undo_call

        if self.agent is None:
            return "the agent is not running"
        if self.busy:
            return "a run is in progress; press Esc to interrupt it first"
        try:
            if redo:
                redo_call(self.agent.session, overwrite=overwrite, skip=skip, requested_by="tui")
            else:
                undo_call(self.agent.session, after_turn=after_run, overwrite=overwrite,
                          skip=skip, requested_by="tui")
        except UndoError as exc:
            return f"nothing {'redone' if redo else 'undone'}: {exc}"
        return ""

    def _ask(self, req: ApprovalRequest) -> Approval:
        from appliance.policy import ScopedApprovalRequest

        scoped = req if isinstance(req, ScopedApprovalRequest) else None
        rules = tuple(r.describe() for r in scoped.always_rules) if scoped else ()
        pending = PendingApproval(
            req.call_id, req.tool, req.args, req.reason, scoped.commands if scoped else (), rules,
            decided_by=scoped.decided_by if scoped else "",
            session_id=scoped.session_id if scoped else "",
            preview=scoped.preview if scoped else "")
        with self._lock:
            self._pending.append(pending)
        self.sink.approval(pending)
        while not pending._done.wait(0.1):
            if self._closed.is_set():
                pending.answer("deny", reason="no answer: the TUI closed")
        with self._lock:
            if pending in self._pending:
                self._pending.remove(pending)
        assert pending._answer is not None
        return pending._answer

    def close(self, wait_s: float = 10.0) -> None:
        """Interrupt a running run, wait briefly for it to record its end, release the agent."""
        self._closed.set()
        if self.busy:
            self.interrupt("TUI closed")
        if self._worker is not None:
            self._worker.join(wait_s)
        if self.agent is not None:
            self.agent.close()
            self.agent = None
        if self._own_store and self._store is not None:
            self._store.close()
            self._store = None

