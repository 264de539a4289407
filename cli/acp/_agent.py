"""Abhed as an ACP agent: sessions from the one assembly, turns on worker threads.

Every session is built by :func:`appliance.compose.start_agent` with door
``acp``, as ``abhed rpc`` and the TUI build theirs, so the site layer, the
engineer's narrowing, extensions, redaction, the event log, compaction,
subagents and undo are the same whichever door a person came in by.  What
this module adds is translation: ACP requests into the calls every door
makes (``Agent.run``, ``Agent.interrupt``, ``Agent.set_mode``, a
``CallbackApprover``), and the session's events into ACP updates
(:mod:`cli.acp._updates`).

Threads: the SDK's connection lives on the asyncio loop; each turn runs
``Agent.run`` on a worker thread.  The session's listener and the model's
deltas are called on that thread and hand their updates to one queue that a
single task sends in order (:class:`_Outbox`); a call that asks waits on its
thread for the editor's answer, which the loop fetches.  A turn's response
goes out only after every update of the turn has.

What the editor's capabilities could add, Abhed does not take: commands never
run in the client's terminal, files are never read or written through the
client (docs/acp.md says why), and MCP servers the client names are started
only if they are the site's reviewed, pinned ones, which are started anyway.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from acp import PROTOCOL_VERSION, RequestError
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AllowedOutcome,
    AudioContentBlock,
    AvailableCommand,
    AvailableCommandsUpdate,
    ClientCapabilities,
    ContentToolCallContent,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    HttpMcpServer,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    McpServerStdio,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    SseMcpServer,
    StopReason,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallUpdate,
)

from appliance import AbhedError
from appliance.compose import Config, StartedAgent, allowed_modes, start_agent
from appliance.events import (
    ActionEvent,
    EventStore,
    PlanUpdated,
    StartupNotice,
    StoredEvent,
)
from appliance.policy import (
    Approval,
    ApprovalRequest,
    CallbackApprover,
    ModeRefused,
    ScopedApproval,
    ScopedApprovalRequest,
)
from cli.acp._permission import permission_content, permission_options
from cli.acp._updates import Update, event_updates, kind_of, locations_of, text, title_of
from models import Delta, ModelsError

__all__ = ["AbhedAgent", "DOOR"]

#: The door recorded in each session's start (``settings.door``) and named in refusals.
DOOR = "acp"
_STOP: dict[str, StopReason] = {"done": "end_turn", "interrupted": "cancelled",
                                "max_tokens": "max_tokens", "max_turns": "max_turn_requests"}
_MODE_NAMES = {
    "plan": ("Plan", "Read-only tools only: the agent explores and writes a plan for you to approve."),
    "ask": ("Ask", "Every change asks you first."),
    "auto": ("Auto", "Runs what policy allows; asks where the site's rules or a destructive "
             "command say so."),
}
_PAGE = 50
#: What a person may do between runs that has no ACP request of its own: the TUI's /undo,
#: /redo and /compact, offered as the editor's slash commands.
COMMANDS = {
    "undo": "Put back the files the newest run not undone yet changed (bash effects are not undone)",
    "redo": "Reverse the last undo still in effect",
    "compact": "Compact the conversation now (mask old tool outputs, then summarise if needed)",
}
#: A plan approved in plan mode is carried out with this prompt (the person chose it).
CARRY_OUT = "The plan is approved. Carry it out now, step by step."


def _invalid(message: str, **data: Any) -> RequestError:
    """A JSON-RPC invalid-params error whose message says what was wrong and what to do."""
    return RequestError(-32602, message, data or None)


@dataclass
class _Session:
    """One ACP session: an Abhed session's agent, its turn, and the questions it waits on."""

    id: str
    cwd: str
    started: StartedAgent | None = None
    notices: list[str] = field(default_factory=list)
    worker: threading.Thread | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    asking: set[concurrent.futures.Future[Approval]] = field(default_factory=set)
    plan: PlanUpdated | None = None
    told_commands: bool = False
    in_turn: bool = False  # from a prompt's arrival to its response (a plan's approval included)

    @property
    def busy(self) -> bool:
        return self.in_turn or (self.worker is not None and self.worker.is_alive())


class _Outbox:
    """Updates from worker threads, sent by one task in the order they were made."""

    def __init__(self, loop: asyncio.AbstractEventLoop, send: Callable[[str, Update], Any]) -> None:
        self.loop = loop
        self.send = send
        self.queue: asyncio.Queue[tuple[str, Update] | asyncio.Future[None]] = asyncio.Queue()
        self.task = loop.create_task(self._pump(), name="abhed-acp-outbox")
        self.dead = False

    def put(self, session_id: str, update: Update) -> None:
        """From any thread."""
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (session_id, update))
        except RuntimeError:  # the loop has ended: nobody is listening any more
            pass

    async def flush(self) -> None:
        """Wait until everything put before this call has been sent (or the client is gone)."""
        if self.task.done():
            return
        mark: asyncio.Future[None] = self.loop.create_future()
        self.queue.put_nowait(mark)
        await asyncio.wait({mark, self.task}, return_when=asyncio.FIRST_COMPLETED)

    async def _pump(self) -> None:
        while True:
            item = await self.queue.get()
            if isinstance(item, asyncio.Future):
                if not item.done():
                    item.set_result(None)
                continue
            if self.dead:
                continue
            try:
                await self.send(*item)
            except (ConnectionError, OSError, RequestError):
                self.dead = True  # the client went away; the turn is interrupted elsewhere


class AbhedAgent:
    """The ACP agent side (implements ``acp.interfaces.Agent``) over one config and event log."""

    def __init__(self, config: Config, store: EventStore, *, provider: str | None = None,
                 model: str | None = None, force_tool: str | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.force_tool = force_tool
        self.store = store
        self.provider = provider
        self.model = model
        self.log = log or (lambda s: print(s, file=sys.stderr, flush=True))
        self.sessions: dict[str, _Session] = {}
        self.client: Client | None = None
        self.client_info: Implementation | None = None
        self.outbox: _Outbox | None = None
        self.closing = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- connection ----------------------------------------------------------
    def on_connect(self, conn: Client) -> None:
        self.client = conn
        self._loop = asyncio.get_running_loop()
        self.outbox = _Outbox(self._loop, lambda sid, u: conn.session_update(session_id=sid, update=u))

    async def initialize(self, protocol_version: int,
                         client_capabilities: ClientCapabilities | None = None,
                         client_info: Implementation | None = None, **kwargs: Any) -> InitializeResponse:
        """What Abhed really offers; the client's terminal and file system are not used."""
        self.client_info = client_info
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                # Text and links to files in the workspace; an image the model cannot read, and
                # embedded file contents would bypass the path rules (docs/acp.md).
                prompt_capabilities=PromptCapabilities(image=False, audio=False,
                                                       embedded_context=False),
                mcp_capabilities=McpCapabilities(http=False, sse=False),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities())),
            auth_methods=[],
            agent_info=Implementation(name="abhed", title="Abhed", version=version("abhed")))

    # -- sessions --------------------------------------------------------------
    def _workspace(self, cwd: Any) -> Path:
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            raise _invalid(f"cwd {str(cwd)[:200]!r} is not an absolute path; send the project "
                           "directory as an absolute path", cwd=str(cwd)[:4096])
        path = Path(cwd)
        if not path.is_dir():
            raise _invalid(f"cwd {cwd[:200]!r} is not an existing directory", cwd=cwd[:4096])
        return path

    def _modes(self, current: str) -> SessionModeState:
        return SessionModeState(current_mode_id=current, available_modes=[
            SessionMode(id=m, name=_MODE_NAMES[m][0], description=_MODE_NAMES[m][1])
            for m in allowed_modes(self.config)])

    def _refuse_mcp(self, servers: list[Any] | None) -> list[str]:
        """Why each MCP server the client named is not started ("" for a site-reviewed one).

        The effective config's servers are the reviewed, pinned ones the layers allow; they
        are started for every session already.  Anything else a client names is refused.
        """
        pinned = {(s.name, s.command, tuple(s.args)) for s in self.config.mcp_servers
                  if s.tools_sha256}
        out: list[str] = []
        for server in servers or []:
            name = str(getattr(server, "name", "?"))[:64]
            if isinstance(server, McpServerStdio) and \
                    (server.name, server.command, tuple(server.args)) in pinned:
                continue
            how = "an HTTP" if isinstance(server, HttpMcpServer) else \
                "an SSE" if isinstance(server, SseMcpServer) else "a stdio"
            out.append(f"MCP server {name!r} named by the editor was refused: {how} server that "
                       "is not one of the site's reviewed, pinned servers (docs/mcp.md). Its "
                       "tools are not offered; ask the operator to review it.")
        return out

    async def _open(self, cwd: Path, session_id: str | None, mcp_servers: list[Any] | None,
                    ) -> _Session:
        refused = self._refuse_mcp(mcp_servers)
        holder = _Session(id=session_id or "", cwd=str(cwd))
        try:
            started = await asyncio.to_thread(
                start_agent, self.config, self.store, cwd, door=DOOR,
                provider_name=self.provider, model=self.model, mode=None,
                approver=CallbackApprover(lambda req: self._ask(holder, req)),
                session_id=session_id)
        except (AbhedError, ModelsError) as exc:
            raise RequestError(-32603, f"the session could not start: {exc}", None) from None
        agent = started.agent
        holder.id, holder.started = agent.session.id, started
        holder.cwd = agent.session.workspace
        for why in refused:
            agent.session.append(StartupNotice(session_id=agent.session.id, kind="mcp_refused",
                                               subject="acp", message=why))
        holder.notices = [n.message for n in started.notices if n.level == "warning"] + refused
        self.sessions[holder.id] = holder
        return holder

    def _listen(self, sess: _Session) -> None:
        assert sess.started is not None
        agent = sess.started.agent
        outbox = self.outbox
        assert outbox is not None

        def on_event(stored: StoredEvent) -> None:
            event = stored.event
            top = event.session_id == sess.id
            if isinstance(event, PlanUpdated) and top:
                sess.plan = event
            preview = None
            if isinstance(event, ActionEvent) and event.tool in ("write", "edit"):
                tool = agent.tools.get(event.tool)
                preview = tool.preview_of(event.args, agent.dispatcher.ctx) if tool else None
            for update in event_updates(event, top=top, replay=False, preview=preview):
                outbox.put(sess.id, update)

        def on_delta(delta: Delta) -> None:
            if delta.kind == "text" and delta.text:
                outbox.put(sess.id, AgentMessageChunk(session_update="agent_message_chunk",
                                                      content=text(delta.text)))

        agent.session.listen(on_event, children=True)
        agent.on_delta = on_delta

    async def new_session(self, cwd: str, additional_directories: list[str] | None = None,
                          mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        """A new Abhed session in the editor's project directory (absolute, existing)."""
        ws = self._workspace(cwd)
        if additional_directories:
            raise _invalid("Abhed works in one workspace per session; additionalDirectories is "
                           "not supported")
        sess = await self._open(ws, None, mcp_servers)
        self._listen(sess)
        assert sess.started is not None
        return NewSessionResponse(session_id=sess.id, modes=self._modes(sess.started.mode.mode))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           additional_directories: list[str] | None = None,
                           **kwargs: Any) -> LoadSessionResponse:
        """Resume an Abhed session: its history replayed as updates, then the response."""
        ws = self._workspace(cwd)
        if session_id in self.sessions:
            raise _invalid(f"session {session_id[:128]} is already open on this connection")
        try:
            info = self.store.session_info(session_id)
        except AbhedError:
            raise _invalid(f"no Abhed session {session_id[:128]!r} in this event log; "
                           "session/list shows the ones there are") from None
        if self._parent_of(session_id):
            raise _invalid(f"session {session_id[:128]} is a subagent's; load its parent session")
        if os.path.realpath(ws) != info["workspace"]:
            raise _invalid(f"session {session_id[:128]} works in {info['workspace']}, not in "
                           f"{cwd[:200]}; open that directory to load it")
        history = list(self.store.events(session_id))
        sess = await self._open(ws, session_id, mcp_servers)
        assert self.client is not None and sess.started is not None
        for stored in history:
            for update in event_updates(stored.event, top=True, replay=True):
                await self.client.session_update(session_id=sess.id, update=update)
        self._listen(sess)
        self.tell_commands(sess)
        if self.outbox is not None:
            await self.outbox.flush()
        return LoadSessionResponse(modes=self._modes(sess.started.mode.mode))

    def _parent_of(self, session_id: str) -> str | None:
        for stored in self.store.events(session_id, types=("session_started",)):
            return getattr(stored.event, "parent_session_id", None)
        return None

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        """The event log's sessions (not subagents'), newest first; ``cwd`` keeps one project's."""
        where = os.path.realpath(cwd) if isinstance(cwd, str) and cwd.startswith("/") else None
        if cwd is not None and where is None:
            raise _invalid("cwd must be an absolute path")
        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            raise _invalid("cursor is not one this agent gave out") from None
        infos = [i for i in reversed(self.store.sessions())
                 if where is None or i["workspace"] == where]
        out: list[SessionInfo] = []
        index = start
        while index < len(infos) and len(out) < _PAGE:
            info = infos[index]
            index += 1
            if self._parent_of(info["id"]):
                continue
            title = ""
            for stored in self.store.events(info["id"], types=("user_message",)):
                title = str(getattr(stored.event, "text", ""))
                break
            out.append(SessionInfo(session_id=info["id"], cwd=info["workspace"],
                                   title=title.split("\n", 1)[0][:120] or None,
                                   updated_at=info["last_event_at"]))
        return ListSessionsResponse(sessions=out,
                                    next_cursor=str(index) if index < len(infos) else None)

    def _session(self, session_id: str) -> _Session:
        sess = self.sessions.get(session_id)
        if sess is None or sess.started is None:
            raise _invalid(f"no session {str(session_id)[:128]!r} on this connection; send "
                           "session/new or session/load first")
        return sess

    async def set_session_mode(self, session_id: str, mode_id: str,
                               **kwargs: Any) -> SetSessionModeResponse:
        """Between turns, a mode the site and the engineer's settings allow; a wider one is refused."""
        sess = self._session(session_id)
        if sess.busy:
            raise _invalid("a turn is in progress; change the mode when it has ended (or cancel it)")
        assert sess.started is not None
        try:
            sess.started.agent.set_mode(mode_id, door=f"{DOOR} session/set_mode")
        except ModeRefused as exc:
            raise _invalid(str(exc), mode=str(mode_id)[:64]) from None
        return SetSessionModeResponse()

    # -- a turn -----------------------------------------------------------------
    def _prompt_text(self, sess: _Session, blocks: list[Any]) -> str:
        parts: list[str] = []
        root = sess.cwd.rstrip("/") + "/"
        for block in blocks:
            if isinstance(block, TextContentBlock):
                parts.append(block.text)
            elif isinstance(block, (ResourceContentBlock, EmbeddedResourceContentBlock)):
                uri = block.uri if isinstance(block, ResourceContentBlock) else block.resource.uri
                path = _file_path(uri)
                if path is None or not (path + "/").startswith(root) and path != sess.cwd:
                    raise _invalid(f"{uri[:300]} is not a file in this session's workspace "
                                   f"{sess.cwd}; Abhed works only there", uri=uri[:4096])
                # A link, never the contents the editor embedded: the model reads the file
                # with `read`, under the path rules and the secret paths, recorded.
                note = " (the editor attached its text; read the file itself)" if isinstance(
                    block, EmbeddedResourceContentBlock) and isinstance(
                    block.resource, TextResourceContents) else ""
                parts.append(f"@{path}{note}")
            elif isinstance(block, (ImageContentBlock, AudioContentBlock)):
                raise _invalid("Abhed takes text and links to workspace files, not images or audio "
                               "(initialize said so)")
            else:
                raise _invalid(f"a prompt block of type {getattr(block, 'type', '?')!r} is not "
                               "supported")
        prompt = " ".join(p for p in parts if p).strip()
        if not prompt:
            raise _invalid("the prompt is empty")
        return prompt

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        """Work the prompt to an end, streaming; answers once every update of the turn is out."""
        sess = self._session(session_id)
        if sess.busy:
            raise _invalid("a turn is already in progress in this session; cancel it or wait")
        message = self._prompt_text(sess, prompt)
        assert sess.started is not None and self.outbox is not None
        self.tell_commands(sess)
        if sess.notices:
            said = "\n".join(f"⚠ {n}" for n in sess.notices)
            sess.notices = []
            self.outbox.put(sess.id, AgentMessageChunk(session_update="agent_message_chunk",
                                                       content=text(said + "\n\n")))
        sess.cancelled.clear()
        sess.plan = None
        sess.in_turn = True
        try:
            command = message.split(None, 1)[0][1:] if message.startswith("/") else ""
            if command in COMMANDS:
                said = await asyncio.to_thread(self._command, sess, command)
                self.outbox.put(sess.id, AgentMessageChunk(session_update="agent_message_chunk",
                                                           content=text(said + "\n")))
                await self.outbox.flush()
                return PromptResponse(stop_reason="end_turn")
            return await self._turn(sess, message)
        finally:
            sess.in_turn = False

    def tell_commands(self, sess: _Session) -> None:
        """Offer the slash commands once per session (the editor lists them as the person types /)."""
        if sess.told_commands or self.outbox is None:
            return
        sess.told_commands = True
        self.outbox.put(sess.id, AvailableCommandsUpdate(
            session_update="available_commands_update",
            available_commands=[AvailableCommand(name=n, description=d) for n, d in COMMANDS.items()]))

    def _command(self, sess: _Session, command: str) -> str:
        """On a thread: /undo, /redo or /compact, as the TUI and rpc do them; what happened, in words."""
        from appliance.events import show
        from appliance.sessions import UndoError, redo, undo

        assert sess.started is not None
        agent = sess.started.agent
        try:
            if command == "compact":
                event = agent.compact("manual")
                return show(event).title if event is not None else \
                    f"nothing was compacted: {agent.compactor.why}"
            act = undo if command == "undo" else redo
            return show(act(agent.session, requested_by=DOOR)).text()
        except UndoError as exc:
            return f"nothing {'undone' if command == 'undo' else 'redone'}: {exc}"

    async def _turn(self, sess: _Session, message: str) -> PromptResponse:
        assert sess.started is not None and self.outbox is not None
        reason = await self._run(sess, message)
        if reason == "done" and sess.plan is not None and not sess.cancelled.is_set() and \
                sess.started.agent.dispatcher.gate.engine.settings.mode == "plan":
            target = await self._approve_plan(sess, sess.plan)
            if target:
                sess.plan = None
                reason = await self._run(sess, CARRY_OUT)
        await self.outbox.flush()
        if sess.cancelled.is_set():
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason=_STOP.get(reason, "end_turn"))

    async def _run(self, sess: _Session, message: str) -> str:
        """One ``Agent.run`` on a worker thread; its end reason (``internal_error`` if it raised)."""
        assert sess.started is not None
        agent = sess.started.agent
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str] = loop.create_future()

        def settle(value: str) -> None:
            if not done.done():
                done.set_result(value)

        force = self.force_tool
        if force is not None and force not in agent.tools:
            raise _invalid(f"--force-tool {force[:64]!r} names no tool of this session: "
                           f"{', '.join(sorted(agent.tools))}")
        choice = {"type": "function", "function": {"name": force}} if force else None

        def work() -> None:
            reason: str
            try:
                reason = agent.run(message, first_tool_choice=choice).reason
            except Exception as exc:
                self.log(f"abhed acp: the run failed: {type(exc).__name__}: {exc}")
                reason = "internal_error"
            try:
                loop.call_soon_threadsafe(settle, reason)
            except RuntimeError:
                pass

        worker = sess.worker = threading.Thread(target=work, name="abhed-acp-run", daemon=True)
        worker.start()
        reason = await done
        # Settling is the thread's last act, but it is still alive for a moment after: an
        # editor that sends its next prompt the instant this one is answered must not be told
        # a turn is in progress (``busy`` counts a live worker, for a run still winding down
        # after a cancel).  The run is over, so the join is immediate.
        await asyncio.to_thread(worker.join)
        return reason

    async def _approve_plan(self, sess: _Session, plan: PlanUpdated) -> str:
        """Ask to leave plan mode and carry out ``plan``; the mode chosen, or "" to keep planning."""
        assert self.client is not None and sess.started is not None
        if self.outbox is not None:
            await self.outbox.flush()  # the plan is on screen before the question on it
        wider = [m for m in allowed_modes(self.config) if m != "plan"]
        if not wider:
            return ""  # the site keeps this engineer in plan mode: nothing to ask
        options = [PermissionOption(option_id=m, name=f"Carry it out in {m} mode",
                                    kind="allow_always" if m == "auto" else "allow_once")
                   for m in reversed(wider)]
        options.append(PermissionOption(option_id="keep_planning", name="Keep planning",
                                        kind="reject_once"))
        try:
            answer = await self.client.request_permission(
                session_id=sess.id, options=options, tool_call=ToolCallUpdate(
                    tool_call_id=plan.call_id, title=f"Leave plan mode and carry out: {plan.title}",
                    kind="switch_mode", status="pending"))
        except Exception as exc:  # no answer is a refusal, never an allow
            self.log(f"abhed acp: the plan's approval got no answer ({type(exc).__name__})")
            return ""
        chosen = answer.outcome.option_id if isinstance(answer.outcome, AllowedOutcome) else ""
        if chosen not in wider:
            return ""
        try:
            sess.started.agent.set_mode(chosen, door=f"{DOOR} plan approval")
        except ModeRefused:
            return ""
        if self.outbox is not None:
            self.outbox.put(sess.id, CurrentModeUpdate(session_update="current_mode_update",
                                                       current_mode_id=chosen))
        return chosen

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Stop the turn and its running command, as Esc does: questions waiting are refused."""
        sess = self.sessions.get(session_id)
        if sess is None or sess.started is None:
            self.log(f"abhed acp: session/cancel for unknown session {str(session_id)[:128]!r}")
            return
        self._interrupt(sess, "acp session/cancel")

    def _interrupt(self, sess: _Session, reason: str) -> None:
        if sess.started is None or not sess.busy:
            return
        sess.cancelled.set()
        if sess.worker is not None and sess.worker.is_alive():
            sess.started.agent.interrupt(reason)
        for fut in list(sess.asking):
            fut.cancel()

    # -- approvals ---------------------------------------------------------------
    def _ask(self, sess: _Session, req: ApprovalRequest) -> Approval:
        """On the worker thread: ask the editor, wait for its answer; no answer is a refusal."""
        loop = self._loop
        if loop is None or self.closing.is_set() or self.client is None:
            return Approval("deny", "acp", "no answer: the editor is gone")
        try:
            fut = asyncio.run_coroutine_threadsafe(self._permission(sess, req), loop)
        except RuntimeError:
            return Approval("deny", "acp", "no answer: the editor is gone")
        sess.asking.add(fut)
        try:
            while True:
                try:
                    return fut.result(timeout=0.1)
                except concurrent.futures.TimeoutError:
                    if sess.cancelled.is_set() or self.closing.is_set():
                        fut.cancel()
                        return Approval("deny", "acp", "no answer: the turn was cancelled")
                except concurrent.futures.CancelledError:
                    return Approval("deny", "acp", "no answer: the turn was cancelled")
        finally:
            sess.asking.discard(fut)

    async def _permission(self, sess: _Session, req: ApprovalRequest) -> Approval:
        assert self.client is not None
        if self.outbox is not None:
            await self.outbox.flush()  # the call's tool_call goes out before the question on it
        scoped = req if isinstance(req, ScopedApprovalRequest) else None
        always = tuple(r.describe() for r in scoped.always_rules) if scoped else ()
        subagent = bool(scoped and scoped.session_id and scoped.session_id != sess.id)
        content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] = [
            ContentToolCallContent(type="content", content=c) if isinstance(c, TextContentBlock)
            else c for c in permission_content(req, always)]
        try:
            answer = await self.client.request_permission(
                session_id=sess.id, options=permission_options(always),
                tool_call=ToolCallUpdate(
                    tool_call_id=req.call_id, title=title_of(req.tool, req.args, subagent=subagent),
                    kind=kind_of(req.tool), status="pending", content=content,
                    locations=locations_of(req.tool, req.args) or None, raw_input=req.args))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return Approval("deny", "acp", f"no answer from the editor ({type(exc).__name__})")
        outcome = answer.outcome
        if not isinstance(outcome, AllowedOutcome):
            return Approval("deny", "acp", "the editor cancelled the question")
        if outcome.option_id == "allow_once":
            return Approval("allow", "acp")
        if outcome.option_id == "allow_always" and always:
            return ScopedApproval("allow", "acp", always=True)
        if outcome.option_id == "reject":
            return Approval("deny", "acp")
        return Approval("deny", "acp", f"the editor answered with option "
                        f"{str(outcome.option_id)[:64]!r}, which was not offered")

    # -- the end -------------------------------------------------------------------
    async def close(self, why: str) -> None:
        """Interrupt every turn, wait for each to record its end, close every session."""
        self.closing.set()
        for sess in self.sessions.values():
            self._interrupt(sess, why)
        for sess in self.sessions.values():
            if sess.worker is not None:
                await asyncio.to_thread(sess.worker.join, 30)
            if sess.started is not None:
                await asyncio.to_thread(sess.started.agent.close)
        self.sessions.clear()
        if self.outbox is not None:
            self.outbox.task.cancel()


def _file_path(uri: str) -> str | None:
    """The absolute, normalised path a ``file://`` URI (or a bare absolute path) names."""
    if uri.startswith("/"):
        raw = uri
    else:
        parsed = urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            return None
        raw = unquote(parsed.path)
    if "\x00" in raw or not raw.startswith("/"):
        return None
    return os.path.realpath(raw)
