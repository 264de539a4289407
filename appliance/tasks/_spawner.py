"""Run one ``task`` call: a child session and loop, a reserved budget, a measured result.

The child's tools come from its ``agent_type`` (appliance.tasks._profiles);
the child itself is assembled by the session's composition
(``appliance.compose``, handed in as a :class:`ChildAssembly`), so it gets
every extension hook, the compaction settings and the policy its parent has,
narrowed to its tools and never looser.  Its budget is reserved from the
parent's (appliance.loop.Budget), its session a new one in the same event
log linked to the parent's call.  The result is what the harness measured
from the child's events (status, files changed, commands and exit codes,
spend); the child's own answer comes last, bounded.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from appliance._session import Session, new_session_id
from appliance.events import TaskEnded, TaskStarted
from appliance.loop import BUDGET_LIMIT_REACHED, Agent, Budget, build_system_prompt, tool_specs
from appliance.sessions import Effects, effects_of
from appliance.tasks._ledger import AgentLedger, TreeLedger
from appliance.tasks._profiles import PROFILE_PROMPTS, child_tools
from tools import FileLedger, Tool, ToolResult, failure
from tools.task import TaskArgs

__all__ = ["SUMMARY_MAX_CHARS", "ChildAssembly", "SubagentSpawner"]

#: About 2k tokens: the specification's bound on what a child hands back (§8).
SUMMARY_MAX_CHARS = 8000
#: The least reply a reservation must leave room for when the server's reply size is not capped.
_MIN_REPLY_TOKENS = 1024


def _refusal(budget: Budget, need: int) -> str:
    """Why no subagent could be reserved: what the run has, spent, and who holds the rest."""
    spent_tokens, spent_turns = budget.spent()
    held = budget.reservations()
    lines = [f"{BUDGET_LIMIT_REACHED}: a subagent needs at least 1 turn and about {need} tokens "
             "(its first request), and this run cannot reserve that now. Nothing was spawned."]
    lines.append(f"This run's budget is {budget.turns} turns / {budget.tokens} tokens; it has spent "
                 f"{spent_turns} turns / {spent_tokens} tokens (finished subagents included).")
    if held:
        lines.append("Reserved by subagents still running: " + "; ".join(
            f"{label}: {turns} turns / {tokens} tokens" for label, tokens, turns in held) + ".")
    else:
        lines.append("No other subagent holds a reservation.")
    lines.append(f"Left for subagents: {max(0, budget.left_turns() - 1)} turns / "
                 f"{max(0, budget.left_tokens())} tokens (one more turn is kept for you to read "
                 "the results)" + ("; no time is left" if budget.left_seconds() <= 0 else "") + ".")
    lines.append(("When those subagents finish, what they did not spend comes back; until then "
                  if held else "")
                 + "do the subtask yourself, or answer with what you have.")
    return "\n".join(lines)


class ChildAssembly(Protocol):
    """How a child is built: the session's composition (``appliance.compose.Children``)."""

    def open_session(self, parent: Session, call_id: str, settings: dict[str, object],
                     session_id: str) -> Session:
        """A new session linked to the parent's ``task`` call, its events relayed to the parent's."""
        ...

    def build(self, session: Session, tools: dict[str, Tool], profile_prompt: str,
              ledger: FileLedger, reserved: Budget) -> Agent:
        """The child's agent, bounded by ``reserved``."""
        ...


class SubagentSpawner:
    """Spawns the children of one parent agent (implements ``tools.task.Subagents``).

    Made before its parent (the agent's tools hold it) and bound to it once
    the agent exists: :meth:`bind`.  Until then a ``task`` call is refused.
    """

    def __init__(self, *, max_concurrent: int = 20, default_max_turns: int = 20,
                 max_tokens: int = 400_000, max_seconds: float = 1800.0) -> None:
        self.parent: Agent | None = None
        self.children: ChildAssembly | None = None
        self.max_concurrent = max_concurrent
        self.default_max_turns = default_max_turns
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.tree = TreeLedger()
        self._running = 0
        self._lock = threading.Lock()

    def parent_ledger(self, session: Session) -> AgentLedger:
        """The parent's view of files, joined to the tree so a child's write is named to it too."""
        self.tree.watch(session, "the parent agent")
        return AgentLedger(session, self.tree, "the parent agent")

    def bind(self, parent: Agent, children: ChildAssembly) -> None:
        """The agent whose ``task`` calls this serves, and how its children are built."""
        self.parent = parent
        self.children = children

    def spawn(self, args: TaskArgs, call_id: str) -> ToolResult:
        budget = getattr(self.parent, "budget", None)
        if budget is None or self.children is None:
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

    def _spawn(self, args: TaskArgs, call_id: str, budget: Budget) -> ToolResult:
        parent, children = self.parent, self.children
        assert parent is not None and children is not None
        need = self._first_request_tokens(args)
        child_id = new_session_id()  # named in a sibling's refusal from the moment it reserves
        label = f"task {args.description!r} (session {child_id})"
        reserved = budget.reserve(self.max_tokens, args.max_turns or self.default_max_turns,
                                  self.max_seconds, min_tokens=need, keep_turns=1, label=label)
        if reserved is None:
            return failure("budget_limit", _refusal(budget, need))
        started = time.monotonic()
        child_session = children.open_session(
            parent.session, call_id, {"agent_type": args.agent_type, "description": args.description},
            child_id)
        self.tree.watch(child_session, label)
        parent.session.append(TaskStarted(
            session_id=parent.session.id, call_id=call_id, child_session_id=child_session.id,
            agent_type=args.agent_type, description=args.description,
            reserved={"turns": reserved.turns, "tokens": reserved.tokens,
                      "deadline_s": round(reserved.left_seconds(), 3)}))
        child = children.build(child_session, child_tools(args.agent_type, parent.tools),
                               PROFILE_PROMPTS[args.agent_type],
                               AgentLedger(child_session, self.tree, label), reserved)
        outcome = None
        try:
            outcome = child.run(args.prompt, budget=reserved)
        finally:
            shell = child.dispatcher.ctx.sandbox
            if shell is not None and shell is not parent.dispatcher.ctx.sandbox:
                shell.close()  # the child's background jobs end with it
            spent = {"turns": reserved.spent_turns, "tokens": reserved.spent_tokens,
                     "seconds": round(time.monotonic() - started, 3)}
            reserved.release()
            effects = effects_of(child_session.store, child_session.id)
            files, commands = effects.files, effects.commands
            parent.session.append(TaskEnded(
                session_id=parent.session.id, call_id=call_id, child_session_id=child_session.id,
                status=outcome.reason if outcome is not None else "internal_error",
                files_changed=files, commands=commands, spent=spent))
            child_session.release()  # its run is over: another process may open it now
        return _result(args, child_session.id, outcome.reason, outcome.message, outcome.answer,
                       files, commands, spent)

    def _first_request_tokens(self, args: TaskArgs) -> int:
        """What a child's first request costs at least: its prompt, tools and a short reply.

        A reservation smaller than this could not pay for one turn, so it is
        refused instead of spawning a child that can only fail.
        """
        parent = self.parent
        assert parent is not None
        tools = child_tools(args.agent_type, parent.tools)
        base = build_system_prompt(parent.dispatcher.ctx.workspace.root, tools)
        messages = [{"role": "system", "content": base.text + PROFILE_PROMPTS[args.agent_type]},
                    {"role": "user", "content": args.prompt}]
        reply = parent.limits.max_completion_tokens or _MIN_REPLY_TOKENS
        return parent.estimate_tokens(messages, tool_specs(tools)) + reply


def _result(args: TaskArgs, child_id: str, reason: str, message: str, answer: str | None,
            files: list[str], commands: list[dict[str, Any]], spent: dict[str, float]) -> ToolResult:
    lines = [f"Subagent {args.description!r} ({args.agent_type}) ended: {reason}"
             + ("" if reason == "done" else f" ({message})") + f". Its session: {child_id}."]
    lines += Effects(files, commands).lines()
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
