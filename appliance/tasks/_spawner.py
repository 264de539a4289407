"""Run one ``task`` call: a child session and loop, a reserved budget, a measured result.

The child is built here, in code: its tools from its ``agent_type``
(appliance.tasks._profiles), its policy attenuated from the parent's (the
same operator rules and mode, capabilities narrowed to its tools: never
looser), its budget reserved from the parent's (appliance.loop.Budget), its
session a new one in the same event log linked to the parent's call.  The
result is what the harness measured from the child's events (status, files
changed, commands and exit codes, spend); the child's own answer comes
last, bounded.
"""

from __future__ import annotations

import threading
import time
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from appliance.events import ActionEvent, ObservationEvent, TaskEnded, TaskStarted
from appliance.loop import (
    BUDGET_LIMIT_REACHED,
    Agent,
    Limits,
    ObservedSession,
    SystemPrompt,
    build_system_prompt,
)
from appliance.sessions import ArtifactStore
from appliance.tasks._ledger import AgentLedger, TreeLedger
from appliance.tasks._profiles import PROFILE_PROMPTS, child_tools
from tools import ToolContext, ToolResult, failure
from tools.task import TaskArgs

if TYPE_CHECKING:
    from appliance._dispatch import Dispatcher
    from appliance.policy import Gate

__all__ = ["SUMMARY_MAX_CHARS", "Subagents"]

#: About 2k tokens: the specification's bound on what a child hands back (§8).
SUMMARY_MAX_CHARS = 8000


class Subagents:
    """Spawns the children of one parent agent (implements ``tools.task.Subagents``)."""

    def __init__(self, parent: Agent, *, max_concurrent: int = 20, default_max_turns: int = 20,
                 max_tokens: int = 400_000, max_seconds: float = 1800.0,
                 first_tool_choice: str | dict[str, Any] | None = None) -> None:
        self.parent = parent
        self.max_concurrent = max_concurrent
        self.default_max_turns = default_max_turns
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.first_tool_choice = first_tool_choice
        self.tree = TreeLedger()
        self._running = 0
        self._lock = threading.Lock()
        ctx = parent.dispatcher.ctx
        # The parent's view joins the tree, so a child's write is named to it too.
        self.tree.watch(parent.session, "the parent agent")
        ctx.ledger = AgentLedger(parent.session, self.tree, "the parent agent")

    def spawn(self, args: TaskArgs, call_id: str) -> ToolResult:
        parent = self.parent
        budget = getattr(parent, "budget", None)
        if budget is None:
            return failure("unavailable", "task runs only inside an agent run. Nothing was spawned.")
        with self._lock:
            if self._running >= self.max_concurrent:
                return failure(
                    "too_many_tasks",
                    f"{self._running} subagents are already running (limit {self.max_concurrent}). "
                    "Wait for them to finish, or do this subtask yourself. Nothing was spawned.")
            self._running += 1
        try:
            return self._spawn(args, call_id, budget)
        finally:
            with self._lock:
                self._running -= 1

    def _spawn(self, args: TaskArgs, call_id: str, budget: Any) -> ToolResult:
        parent = self.parent
        turns = min(args.max_turns or self.default_max_turns, budget.left_turns() - 1)
        reserved = budget.reserve(self.max_tokens, turns, self.max_seconds) if turns >= 1 else None
        if reserved is None:
            return failure(
                "budget_limit",
                f"{BUDGET_LIMIT_REACHED}: this run has {max(0, budget.left_tokens())} tokens and "
                f"{max(0, budget.left_turns())} turns left, too little to reserve for a subagent. "
                "Nothing was spawned; finish the work yourself, or answer with what you have.")
        started = time.monotonic()
        store = parent.session.store
        ws = parent.dispatcher.ctx.workspace
        child_session = ObservedSession.create(
            store, ws.root, version=version("abhed"), parent=(parent.session.id, call_id),
            settings={"agent_type": args.agent_type, "description": args.description})
        assert isinstance(child_session, ObservedSession)
        parent.session.adopt(child_session)  # rpc and --json stream the child's events too
        label = f"task {args.description!r} (session {child_session.id})"
        self.tree.watch(child_session, label)
        parent.session.append(TaskStarted(
            session_id=parent.session.id, call_id=call_id, child_session_id=child_session.id,
            agent_type=args.agent_type, description=args.description,
            reserved={"turns": reserved.turns, "tokens": reserved.tokens,
                      "deadline_s": round(reserved.left_seconds(), 3)}))
        child = self._child_agent(args, child_session, label, reserved)
        outcome = None
        try:
            outcome = child.run(args.prompt, budget=reserved)
        finally:
            spent = {"turns": reserved.spent_turns, "tokens": reserved.spent_tokens,
                     "seconds": round(time.monotonic() - started, 3)}
            reserved.release()
            files, commands = _measure(child_session)
            parent.session.append(TaskEnded(
                session_id=parent.session.id, call_id=call_id, child_session_id=child_session.id,
                status=outcome.reason if outcome is not None else "internal_error",
                files_changed=files, commands=commands, spent=spent))
        return _result(args, child_session.id, outcome.reason, outcome.message, outcome.answer,
                       files, commands, spent)

    def _child_agent(self, args: TaskArgs, session: ObservedSession, label: str,
                     reserved: Any) -> Agent:
        from appliance import Dispatcher

        parent = self.parent
        pctx = parent.dispatcher.ctx
        tools = child_tools(args.agent_type, parent.tools)
        ctx = ToolContext(
            workspace=pctx.workspace, settings=pctx.settings,
            ledger=AgentLedger(session, self.tree, label),
            sandbox=pctx.sandbox if "bash" in tools else None,
            sandbox_problem=pctx.sandbox_problem,
            artifacts=ArtifactStore.beside(session.store.path, session.id))
        dispatcher: Dispatcher = Dispatcher(session, tools, ctx, _child_gate(parent, tools))
        base = build_system_prompt(pctx.workspace.root, tools)
        prompt = SystemPrompt(base.text + "\n" + PROFILE_PROMPTS[args.agent_type] + "\n",
                              base.instructions_file)
        limits = Limits(max_turns=reserved.turns, max_tokens=reserved.tokens,
                        deadline_s=max(0.001, reserved.left_seconds()),
                        max_completion_tokens=parent.limits.max_completion_tokens,
                        max_repeated_failures=parent.limits.max_repeated_failures)
        return Agent(session=session, dispatcher=dispatcher, provider=parent.provider,
                     system_prompt=prompt, tools=tools, limits=limits,
                     first_tool_choice=self.first_tool_choice)


def _child_gate(parent: Agent, tools: dict[str, Any]) -> Gate:
    """The parent's gate, narrowed: same rules, hook, approver and mode; only the child's capabilities.

    ``PolicyEngine.attenuated`` is the one way a narrower policy is made, so a
    child can never hold what its parent does not.
    """
    from appliance.policy import Gate

    gate = parent.dispatcher.gate
    caps = set().union(*(t.capabilities for t in tools.values())) if tools else set()
    engine = gate.engine.attenuated(caps)
    child = Gate(engine, hook=gate.hook, approver=gate.approver, run_id=gate.run_id,
                 chosen_by=gate.chosen_by, operator=gate.operator, config_file=gate.config_file)
    child.basis_digest = gate.basis_digest  # the parent's basis; the child's narrowing is in its tools
    return child


def _measure(session: ObservedSession) -> tuple[list[str], list[dict[str, Any]]]:
    """Files the child changed and commands it ran, from its own events (not its word)."""
    files: list[str] = []
    commands: list[dict[str, Any]] = []
    actions: dict[str, Any] = {}
    for stored in session.store.events(session.id, types=("action", "observation")):
        e = stored.event
        if isinstance(e, ActionEvent):
            actions[e.call_id] = e.args
        elif isinstance(e, ObservationEvent):
            d = e.result.details
            if e.tool in ("write", "edit") and e.result.ok and d.get("changed"):
                path = str(d.get("path"))
                if path not in files:
                    files.append(path)
            elif e.tool == "bash":
                args = actions.get(e.call_id)
                command = args.get("command") if isinstance(args, dict) else None
                if command is not None:
                    commands.append({"command": str(command)[:500], "exit_code": d.get("exit_code"),
                                     "ok": e.result.ok})
    return files, commands


def _result(args: TaskArgs, child_id: str, reason: str, message: str, answer: str | None,
            files: list[str], commands: list[dict[str, Any]], spent: dict[str, float]) -> ToolResult:
    lines = [f"Subagent {args.description!r} ({args.agent_type}) ended: {reason}"
             + ("" if reason == "done" else f" ({message})") + f". Its session: {child_id}."]
    lines.append("Files it changed: " + (", ".join(files) if files else "none")
                 + (" (bash commands may have changed more)" if commands else "") + ".")
    if commands:
        shown = "; ".join(f"`{c['command'][:120]}` -> exit {c['exit_code']}" for c in commands[:20])
        more = f" and {len(commands) - 20} more" if len(commands) > 20 else ""
        lines.append(f"Commands it ran: {shown}{more}.")
    lines.append(f"Spent: {spent['turns']:g} turns, {spent['tokens']:g} tokens, {spent['seconds']:g} s.")
    summary = (answer or "").strip()
    cut = len(summary) > SUMMARY_MAX_CHARS
    if cut:
        summary = (summary[:SUMMARY_MAX_CHARS] + f"\n[the summary was cut at {SUMMARY_MAX_CHARS} "
                   f"characters; the whole answer is in session {child_id} "
                   f"(`abhed sessions show {child_id}`)]")
    lines.append("Its summary (the subagent's own words, not verified):\n"
                 + (summary or "(it gave no final answer)"))
    details = {"child_session_id": child_id, "status": reason, "files_changed": files,
               "commands": commands, "spent": spent, "agent_type": args.agent_type,
               "summary_truncated": cut}
    text = "\n".join(lines)
    if reason == "done":
        return ToolResult(ok=True, content=text, truncated=cut, details=details)
    if reason == "budget":
        text = f"{BUDGET_LIMIT_REACHED}: the subagent used its reserved budget. What it finished is kept.\n" + text
        return failure("budget_limit", text, details=details)
    return failure("task_incomplete", text + "\nWhat it finished is kept; check before redoing it.",
                   details=details)
