"""task: hand a self-contained subtask to a subagent with a fresh context (§8).

The tool is the contract the model sees; the spawning lives in the
appliance (``ToolContext.subagents``), because a subagent is a whole loop:
its own session in the same event log, tools chosen in code from
``agent_type``, a policy never looser than the parent's, and a budget
reserved from the parent's.  What comes back is computed by the harness
from the child's events (status, files changed, commands and exit codes,
spend), with the child's own summary bounded beside it.
"""

from __future__ import annotations

from typing import Annotated, Literal, Protocol

from pydantic import Field

from tools._result import ToolFailure, ToolResult
from tools._tool import Args, Tool, ToolContext

__all__ = ["AGENT_TYPES", "MAX_PROMPT_CHARS", "Subagents", "Task", "TaskArgs"]

AGENT_TYPES = ("explore", "test", "review", "general")
#: A brief, not a transcript: a 1 MB prompt is refused before anything is spent.
MAX_PROMPT_CHARS = 32_000

AgentType = Literal["explore", "test", "review", "general"]


class TaskArgs(Args):
    prompt: Annotated[str, Field(min_length=1)] = Field(
        description="Complete, self-contained task. The subagent sees none of this conversation: "
        "name every file, path, symbol and constraint it needs.")
    description: Annotated[str, Field(min_length=1, max_length=80)] = Field(
        description="3-5 word label.")
    agent_type: AgentType = Field(
        default="general", description="Which subagent profile: explore | test | review | general.")
    max_turns: Annotated[int, Field(ge=1, le=200)] | None = Field(
        default=None, description="Model turns the subagent may use (capped by the budget left).")


class Subagents(Protocol):
    """What the appliance provides to run one task call to its end."""

    def spawn(self, args: TaskArgs, call_id: str) -> ToolResult: ...


class Task(Tool):
    name = "task"
    description = (
        "Spawn a subagent with a fresh context to handle a self-contained subtask. Use when a task "
        "requires extensive exploration whose intermediate detail you do not need. The subagent "
        "returns only a summary, plus what the harness measured: files it changed, commands it "
        "ran with exit codes, budget spent. The prompt MUST be self-contained: the subagent sees "
        "NONE of this conversation, so never write \"the file we discussed\" or \"as above\"; "
        "give paths, names and the exact goal. agent_type: explore (read, glob, grep; changes "
        "nothing), review (the same, to judge a change), test (explore + bash, to run tests), "
        "general (every tool but task). Several task calls in one reply run concurrently; each "
        "reserves part of your remaining budget, and when too little is left the call fails with "
        "\"Budget limit reached\": finish the work yourself."
    )
    args_model = TaskArgs
    capabilities = frozenset({"agent:spawn"})
    mutates = False  # the child's own calls are checked by the child's policy, one by one

    def run(self, args: TaskArgs, ctx: ToolContext) -> ToolResult:
        if len(args.prompt) > MAX_PROMPT_CHARS:
            raise ToolFailure(
                "too_large",
                f"The prompt is {len(args.prompt)} characters, over the {MAX_PROMPT_CHARS} limit. "
                "A subagent needs a brief, not a transcript: state the goal and name the files; it "
                "can read them itself. Nothing was spawned.")
        spawner = ctx.subagents
        if spawner is None:
            raise ToolFailure(
                "unavailable",
                "Subagents are not available here (nested spawning is off, or this is not an agent "
                "run). Do the subtask yourself with the other tools.")
        return spawner.spawn(args, ctx.call_id)
