"""``abhed rpc``: drive the agent with line-delimited JSON on stdin and stdout.

Requests (one JSON object per line, ``id`` optional and echoed)::

    {"method": "start", "mode"?: "auto"|"ask"|"plan", "workspace"?, "provider"?, "model"?, "session"?,
     "deltas"?: true|false}
    {"method": "prompt", "prompt": "..."}        starts a run in the background
    {"method": "steer", "text": "..."}           a message for the running run
    {"method": "abort"}                           interrupt the running run
    {"method": "approve", "request_id": "...", "decision": "allow"|"deny", "reason"?}
    {"method": "undo", "to_turn"?, "overwrite"?: [...], "skip"?: [...]}   between runs
    {"method": "redo", "overwrite"?: [...], "skip"?: [...]}             reverses the last undo
    {"method": "compact"} / {"method": "mode", "mode": ...}              between runs
    {"method": "shutdown"}

Lines out: ``{"type": "response", "id", "method", "ok": true, ...}`` for each
request, ``{"type": "error", "id", "error": {"code", "message"}}`` for a request
that failed (never a crash), ``{"type": "event", "seq", "event"}`` for every
event the agent records, ``{"type": "delta", "kind", "text", "index", "name"}``
for each piece of the model's reply as it streams (transient, never
persisted; ``"deltas": false`` in start turns them off), and
``{"type": "approval_request", "request_id", ...}`` when a call needs an answer.  docs/rpc.md is the full reference.

``start`` without ``mode`` takes the operator's ``policy.mode``; a looser mode
than that is refused (``mode_refused``).  Without ``workspace`` (and without
``--workspace``) the session works in the process's current directory.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from appliance import AbhedError
from appliance.compose import Config, StartedAgent, start_agent
from appliance.events import EventStore, StoredEvent
from appliance.loop import Agent
from appliance.policy import MODES, Approval, ApprovalRequest, CallbackApprover, ModeRefused
from models import Delta, ModelsError, OpenAIProvider

__all__ = ["MAX_LINE_BYTES", "RpcServer"]

MAX_LINE_BYTES = 4 * 1024 * 1024


def _say(line: str) -> None:
    """What start-up tells a person while they wait (a model service started on demand):
    stderr, since stdout is the protocol's."""
    print(line, file=sys.stderr, flush=True)


class _Fail(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RpcServer:
    """One rpc connection: reads requests from ``inp``, writes lines to ``out``."""

    def __init__(self, config: Config, store: EventStore, inp: IO[bytes], out: IO[str], *,
                 workspace: Path | None = None, provider: str | None = None, model: str | None = None,
                 log: Callable[[str], None] = lambda s: None) -> None:
        self.config = config
        self.store = store
        self.inp = inp
        self.out = out
        self.defaults = {"workspace": workspace, "provider": provider, "model": model}
        self.log = log
        self._write_lock = threading.Lock()
        self.agent: Agent | None = None
        self.started: StartedAgent | None = None
        self.provider: OpenAIProvider | None = None
        self._worker: threading.Thread | None = None
        # Set when the current run's run_ended (its last event) has been sent.
        self._run_over = threading.Event()
        self._pending: dict[str, tuple[threading.Event, list[Approval]]] = {}
        self._pending_lock = threading.Lock()
        self._next_request = 0
        self._closing = threading.Event()

    # -- output -----------------------------------------------------------------
    def send(self, obj: dict[str, Any]) -> None:
        # Every line out goes through the event log's redactor: events are already
        # redacted, but deltas, approval requests and errors are not events.
        if self.store.redactor:
            obj = self.store.redactor.value(obj)
        line = json.dumps(obj, ensure_ascii=False)
        with self._write_lock:
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._closing.set()

    def _delta(self, delta: Delta) -> None:
        # Transient progress: what the model is writing, before the model_turn event records it.
        self.send({"type": "delta", "kind": delta.kind, "text": delta.text, "index": delta.index,
                   "name": delta.name})

    def _event(self, stored: StoredEvent) -> None:
        ev = stored.event
        if ev.type == "run_ended" and self.agent is not None and ev.session_id == self.agent.session.id:
            self._run_over.set()  # before the line goes out: a client that saw it finds us idle
        self.send({"type": "event", "seq": stored.seq, "event": stored.event.model_dump(mode="json")})

    # -- approvals ----------------------------------------------------------------
    def _ask(self, req: ApprovalRequest) -> Approval:
        with self._pending_lock:
            self._next_request += 1
            rid = f"ap-{self._next_request}"
            done = threading.Event()
            box: list[Approval] = []
            self._pending[rid] = (done, box)
        line: dict[str, Any] = {"type": "approval_request", "request_id": rid, "call_id": req.call_id,
                                "tool": req.tool, "args": req.args, "reason": req.reason}
        # What policy adds (appliance.policy.ScopedApprovalRequest): the bash
        # commands at issue and the rules an "always" answer would store.
        commands = getattr(req, "commands", ())
        always = getattr(req, "always_rules", ())
        if commands:
            line["commands"] = list(commands)
        line["always_offered"] = bool(always)
        if always:
            line["always_rules"] = [r.model_dump(mode="json") if hasattr(r, "model_dump") else str(r)
                                    for r in always]
        self.send(line)
        agent = self.agent
        while not done.wait(0.1):
            if self._closing.is_set() or (agent is not None and agent._cancel.cancelled):
                with self._pending_lock:
                    self._pending.pop(rid, None)
                return Approval("deny", "rpc", "no answer: the run was aborted or the caller left")
        return box[0]

    # -- the request loop ------------------------------------------------------------
    def serve(self) -> int:
        """Handle requests until EOF or ``shutdown``; returns the exit code (0)."""
        try:
            while not self._closing.is_set():
                raw = self.inp.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    break
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    # Skip the rest of the oversized line, then report it.
                    while True:
                        more = self.inp.readline(MAX_LINE_BYTES)
                        if not more or more.endswith(b"\n"):
                            break
                    self.send({"type": "error", "id": None, "error": {
                        "code": "line_too_long",
                        "message": f"a request line exceeded {MAX_LINE_BYTES} bytes and was ignored"}})
                    continue
                if not raw.strip():
                    continue
                self.handle_line(raw)
        finally:
            self.close()
        return 0

    def handle_line(self, raw: bytes) -> None:
        rid: Any = None
        method = None
        try:
            try:
                text = raw.decode("utf-8")
                req = json.loads(text)
            except (UnicodeDecodeError, ValueError) as exc:
                raise _Fail("parse_error", f"the line is not UTF-8 JSON ({type(exc).__name__}); send one "
                            "JSON object per line") from None
            except RecursionError:  # [[[[... past Python's limit: this line fails, not the server
                raise _Fail("parse_error", "the line nests too deeply to read; send one flat JSON "
                            "object per line") from None
            if not isinstance(req, dict):
                raise _Fail("invalid_request", "a request must be a JSON object with a \"method\"")
            rid = req.get("id")
            if rid is not None and not isinstance(rid, (str, int)) or isinstance(rid, bool):
                rid = None
                raise _Fail("invalid_request", "\"id\" must be a string or an integer")
            method = req.get("method")
            handler = {"start": self._start, "prompt": self._prompt, "steer": self._steer,
                       "abort": self._abort, "approve": self._approve, "undo": self._undo,
                       "redo": self._redo,
                       "compact": self._compact, "mode": self._mode,
                       "shutdown": self._shutdown}.get(method if isinstance(method, str) else "")
            if handler is None:
                raise _Fail("unknown_method", f"unknown method {str(method)[:64]!r}; methods: start, prompt, "
                            "steer, abort, approve, undo, redo, compact, mode, shutdown")
            result = handler(req)
            self.send({"type": "response", "id": rid, "method": method, "ok": True, **result})
        except _Fail as exc:
            self.send({"type": "error", "id": rid, "method": method if isinstance(method, str) else None,
                       "error": {"code": exc.code, "message": exc.message}})

    # -- methods ---------------------------------------------------------------
    @staticmethod
    def _str(req: dict[str, Any], key: str, *, required: bool = True, max_len: int = 1_000_000) -> str | None:
        value = req.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or (required and not value):
            raise _Fail("invalid_params", f"\"{key}\" must be a non-empty string")
        if len(value) > max_len:
            raise _Fail("invalid_params", f"\"{key}\" is longer than {max_len} characters")
        return value

    def _start(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.agent is not None:
            raise _Fail("already_started", f"this connection already has session {self.agent.session.id}")
        mode = req.get("mode")
        if mode is not None and mode not in MODES:
            raise _Fail("invalid_params", f"\"mode\" must be one of {', '.join(MODES)}, or left "
                        "out for the operator's policy.mode")
        deltas = req.get("deltas", True)
        if not isinstance(deltas, bool):
            raise _Fail("invalid_params", "\"deltas\" must be true or false")
        ws_raw = self._str(req, "workspace", required=False, max_len=4096)
        workspace = Path(ws_raw) if ws_raw else self.defaults["workspace"] or Path.cwd()
        if not isinstance(workspace, Path) or not workspace.is_dir():
            raise _Fail("invalid_params", f"workspace {str(workspace)[:200]!r} is not an existing "
                        "directory; give \"workspace\" in start, or --workspace on the command line")
        try:
            started = start_agent(
                self.config, self.store, workspace, door="rpc start \"mode\"",
                provider_name=self._str(req, "provider", required=False, max_len=64) or self.defaults["provider"],  # type: ignore[arg-type]
                model=self._str(req, "model", required=False, max_len=256) or self.defaults["model"],  # type: ignore[arg-type]
                mode=mode, approver=CallbackApprover(self._ask),
                session_id=self._str(req, "session", required=False, max_len=128),
                say=_say)
        except ModeRefused as exc:
            raise _Fail("mode_refused", str(exc)) from None
        except (AbhedError, ModelsError) as exc:
            raise _Fail("start_failed", str(exc)) from None
        self.started = started
        agent, provider = started.agent, started.provider
        self.agent, self.provider = agent, provider
        agent.session.listen(self._event, children=True)
        if deltas:
            agent.on_delta = self._delta
        return {"session_id": agent.session.id, "provider": provider.name, "model": provider.model,
                "mode": started.mode.mode, "mode_chosen_by": started.mode.chosen_by,
                "workspace": agent.session.workspace, "tools": sorted(agent.tools),
                "notices": [{"kind": n.kind, "subject": n.subject, "message": n.message,
                             "level": n.level} for n in started.notices]}

    def _need_agent(self) -> Agent:
        if self.agent is None:
            raise _Fail("not_started", "send {\"method\": \"start\"} first")
        return self.agent

    def _busy(self) -> bool:
        worker = self._worker
        if worker is None or not worker.is_alive():
            return False
        if self._run_over.is_set():
            # run_ended is the run's last event and the worker is only returning: a
            # client may send its next request the moment it reads run_ended, so wait
            # that out instead of refusing the request as busy.
            worker.join(10)
        return worker.is_alive()

    def _prompt(self, req: dict[str, Any]) -> dict[str, Any]:
        agent = self._need_agent()
        text = self._str(req, "prompt")
        assert text is not None
        if self._busy():
            raise _Fail("busy", "a run is in progress; send steer to add to it, or abort it first")
        force = self._str(req, "tool", required=False, max_len=64)
        if force is not None and force not in agent.tools:
            raise _Fail("invalid_params", f"\"tool\" must name a tool: {', '.join(sorted(agent.tools))}")
        choice = {"type": "function", "function": {"name": force}} if force else None

        def work() -> None:
            try:
                agent.run(text, first_tool_choice=choice)
            except Exception as exc:
                self.send({"type": "error", "id": None, "method": "prompt", "error": {
                    "code": "internal_error", "message": f"the run failed: {type(exc).__name__}: {exc}"}})

        self._run_over.clear()
        self._worker = threading.Thread(target=work, name="abhed-run", daemon=True)
        self._worker.start()
        return {"accepted": True}

    def _steer(self, req: dict[str, Any]) -> dict[str, Any]:
        agent = self._need_agent()
        text = self._str(req, "text", required=False) or self._str(req, "prompt")
        if not self._busy():
            raise _Fail("not_running", "no run is in progress; send prompt instead")
        assert text is not None
        agent.steer(text)
        return {"queued": True}

    def _abort(self, req: dict[str, Any]) -> dict[str, Any]:
        agent = self._need_agent()
        running = self._busy()
        if running:
            agent.interrupt("rpc abort")
        return {"aborted": running}

    def _compact(self, req: dict[str, Any]) -> dict[str, Any]:
        agent = self._need_agent()
        if self._busy():
            raise _Fail("busy", "a run is in progress; compaction by hand happens between runs")
        event = agent.compact("manual")
        if event is None:
            raise _Fail("nothing_to_compact", f"nothing was compacted: {agent.compactor.why}")
        return {"compacted": event.model_dump(mode="json")}

    def _mode(self, req: dict[str, Any]) -> dict[str, Any]:
        """The person leaves plan mode (or enters it): a user decision the model cannot make."""
        agent = self._need_agent()
        mode = req.get("mode")
        if mode not in MODES:
            raise _Fail("invalid_params", f"\"mode\" must be one of {', '.join(MODES)}")
        if self._busy():
            raise _Fail("busy", "a run is in progress; change the mode between runs")
        try:
            choice = agent.set_mode(mode, door="rpc mode")
        except ModeRefused as exc:
            raise _Fail("mode_refused", str(exc)) from None
        return {"mode": choice.mode, "mode_chosen_by": choice.chosen_by}

    def _undo(self, req: dict[str, Any]) -> dict[str, Any]:
        from appliance.sessions import undo

        to_turn = req.get("to_turn")
        if to_turn is not None and (not isinstance(to_turn, int) or isinstance(to_turn, bool)):
            raise _Fail("invalid_params", "\"to_turn\" must be an integer (undo every run after it)")
        return self._undo_or_redo(req, "undo", lambda session, overwrite, skip: undo(
            session, after_turn=to_turn, overwrite=overwrite, skip=skip, requested_by="rpc"))

    def _redo(self, req: dict[str, Any]) -> dict[str, Any]:
        from appliance.sessions import redo

        return self._undo_or_redo(req, "redo", lambda session, overwrite, skip: redo(
            session, overwrite=overwrite, skip=skip, requested_by="rpc"))

    def _undo_or_redo(self, req: dict[str, Any], verb: str,
                      act: Callable[[Any, list[str], list[str]], Any]) -> dict[str, Any]:
        from appliance.sessions import UndoError

        agent = self._need_agent()
        if self._busy():
            raise _Fail("busy", f"a run is in progress; abort it or wait for run_ended, then {verb}")
        lists = {}
        for key in ("overwrite", "skip"):
            value = req.get(key, [])
            if (not isinstance(value, list) or len(value) > 10_000
                    or not all(isinstance(p, str) and 0 < len(p) <= 4096 for p in value)):
                raise _Fail("invalid_params", f"\"{key}\" must be a list of file paths (absolute, "
                            "as the refusal named them)")
            lists[key] = value
        try:
            event = act(agent.session, lists["overwrite"], lists["skip"])
        except UndoError as exc:
            raise _Fail(f"nothing_to_{verb}", str(exc)) from None
        return {verb: event.model_dump(mode="json")}

    def _approve(self, req: dict[str, Any]) -> dict[str, Any]:
        rid = self._str(req, "request_id", max_len=64)
        decision = req.get("decision")
        if decision not in ("allow", "deny"):
            raise _Fail("invalid_params", "\"decision\" must be \"allow\" or \"deny\"")
        reason = self._str(req, "reason", required=False, max_len=2000) or ""
        always = req.get("always", False)
        if not isinstance(always, bool):
            raise _Fail("invalid_params", "\"always\" must be true or false")
        with self._pending_lock:
            pending = self._pending.pop(rid or "", None)
        if pending is None:
            raise _Fail("unknown_request", f"no approval request {rid!r} is waiting")
        done, box = pending
        if always and decision == "allow":
            from appliance.policy import ScopedApproval

            box.append(ScopedApproval(decision, "rpc", reason, always=True))
        else:
            box.append(Approval(decision, "rpc", reason))
        done.set()
        return {"request_id": rid}

    def _shutdown(self, req: dict[str, Any]) -> dict[str, Any]:
        self._closing.set()
        return {}

    def close(self) -> None:
        """Abort a running run, wait for it to record its end, release the provider."""
        self._closing.set()
        if self.agent is not None and self._busy():
            self.agent.interrupt("rpc connection closed")
        if self._worker is not None:
            self._worker.join(30)
        if self.agent is not None:
            self.agent.close()
        self.provider = None
