"""The agent loop: ask the model, run the calls it makes, repeat until it answers.

One run works one prompt to an end.  Everything that can end it early (a
limit, an interrupt, a provider failure) is a :class:`StopRun` caught in
:meth:`Agent.run`; every tool call, good or malformed, becomes a tool result
the model reads, never an exception.  Tools run through
:class:`appliance.Dispatcher` only, and the loop has no policy of its own:
the dispatcher's gate applies the mode, the rules and the approvals, and
writes every action, decision and observation event.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from appliance._dispatch import Dispatcher
from appliance._session import Session
from appliance.assembly import Limits
from appliance.events import (
    Compacted,
    ModelTurn,
    RunEnded,
    RunEndReason,
    RunStarted,
    TurnToolCall,
    TurnUsage,
    UserMessage,
)
from appliance.loop._budget import BUDGET_LIMIT_REACHED, Budget
from appliance.loop._compact import Compactor
from appliance.loop._history import History
from appliance.loop._limits import StopRun
from appliance.loop._prompt import SystemPrompt, tool_specs
from appliance.loop._recover import recover_interrupted_run
from foundation import is_within
from models import (
    CancelToken,
    ChatRequest,
    Delta,
    ModelReply,
    ModelStreamLost,
    Provider,
    ProviderError,
    RequestCancelled,
    ToolCall,
)
from tools import Tool, ToolResult

if TYPE_CHECKING:
    from appliance.policy import ModeChoice

__all__ = ["Agent", "RunOutcome"]


def _batches(calls: list[tuple[str, ToolCall]]) -> list[list[tuple[str, ToolCall]]]:
    """Consecutive task calls form one concurrent batch; every other call runs alone, in order."""
    out: list[list[tuple[str, ToolCall]]] = []
    for item in calls:
        if item[1].name == "task" and out and out[-1][0][1].name == "task":
            out[-1].append(item)
        else:
            out.append([item])
    return out


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    reason: RunEndReason
    message: str
    answer: str | None
    turns: int

    @property
    def ok(self) -> bool:
        return self.reason == "done"


@dataclass
class _Run:
    """One run's state while it works: its id, its deadline timer and what it has counted."""

    id: str
    timer: threading.Timer
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    answer: str | None = None


def _signature(tool: dict[str, Any]) -> str:
    """``read(path: string, offset?: integer)``: what a correction shows the model."""
    fn = tool["function"]
    params = fn.get("parameters") or {}
    required = set(params.get("required") or [])
    parts = []
    for name, prop in (params.get("properties") or {}).items():
        kind = prop.get("type") or "/".join(
            str(p.get("type")) for p in prop.get("anyOf", []) if isinstance(p, dict)) or "value"
        parts.append(f"{name}{'' if name in required else '?'}: {kind}")
    return f"{fn['name']}({', '.join(parts)})"


class Agent:
    """Runs prompts in one session against one provider."""

    def __init__(self, *, session: Session, dispatcher: Dispatcher, provider: Provider,
                 system_prompt: SystemPrompt, tools: dict[str, Tool], limits: Limits | None = None,
                 first_tool_choice: str | dict[str, Any] | None = None,
                 on_delta: Callable[[Delta], None] | None = None,
                 before_send: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
                 ) -> None:
        self.session = session
        self.dispatcher = dispatcher
        self.provider = provider
        self.system_prompt = system_prompt
        self.tools = tools
        self.specs = tool_specs(tools)
        self.signatures = {s["function"]["name"]: _signature(s) for s in self.specs}
        self.limits = limits or Limits()
        self.first_tool_choice = first_tool_choice
        self.on_delta = on_delta
        # Extensions' before_send: may drop messages from what goes upstream;
        # the conversation kept here (and the event log) stays whole.
        self.before_send = before_send
        # The conversation is a fold of the session's events (the log is the
        # one source of truth): rebuilt from what is recorded, then fed each
        # event as it is appended, so a resumed session sends the same bytes.
        self.history = History.rebuild(session.store.events(session.id), system_prompt.text,
                                       self.signatures, dispatcher.ctx.workspace.root,
                                       {name: tool.source for name, tool in tools.items()})
        self._resumed = self.history.runs > 0
        session.listen(lambda stored: self.history.feed(stored.event, stored.session_seq)
                       if stored.event.session_id == session.id else None)
        recover_interrupted_run(session, self.history)
        self.compactor = Compactor(self.limits.context_tokens, compact_at=self.limits.compact_at)
        # The shell's working directory carries across processes, as it does across calls.
        sandbox = dispatcher.ctx.sandbox
        cwd = self.history.cwd
        if sandbox is not None and cwd and os.path.isdir(cwd) and is_within(cwd,
                                                                             sandbox.workspace):
            sandbox.cwd = cwd
        self.run_id = ""
        self._steers: list[str] = []
        self._lock = threading.Lock()
        self._cancel = CancelToken()
        self.running = False
        self._run_tool_choice: str | dict[str, Any] | None = None
        self.closers: list[Callable[[], None]] = []

    def set_mode(self, mode: str, *, door: str) -> ModeChoice:
        """Switch the mode between runs (a person's decision, e.g. leaving plan mode).

        Bounded like every door: the gate applies :func:`appliance.policy.resolve_mode`
        against the operator's ``policy.mode``; a looser mode raises ``ModeRefused``.
        The next ``run_started`` records the new mode and who chose it.
        """
        return self.dispatcher.gate.set_mode(mode, door=door)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far, as folded from the session's events."""
        return self.history.messages

    def estimate_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        """A request's prompt tokens, by this agent's estimate (calibrated on the server's counts)."""
        return self.compactor.estimate(messages, tools)

    def close(self) -> None:
        """Release what the agent holds: the tooling (sandbox, extensions, MCP), the provider,
        and the session itself (another process may open it now)."""
        for fn in reversed(self.closers):
            fn()
        self.closers.clear()
        self.session.release()

    # -- control from other threads ------------------------------------------
    def steer(self, text: str) -> None:
        """Queue a message for the model; it is sent before the next model call."""
        with self._lock:
            self._steers.append(text)

    def take_steers(self) -> list[str]:
        """Steers that came too late for the run that just ended (after its last model call),
        handed back, oldest first, so the door can send them on (a front end sends them as
        the next prompt) instead of the next run finding them before its own prompt."""
        with self._lock:
            steers, self._steers = self._steers, []
        return steers

    def interrupt(self, reason: str = "interrupted") -> None:
        """Stop the model stream and a running shell command at once, then the run.

        A file tool finishes its (short, bounded) call; a bash command is
        signalled through the sandbox and its result records the signal.
        Subagents this run spawned are cancelled as a cascade (their budgets
        are reserved from this run's).
        """
        self._stop_now(self._cancel, reason)
        budget = getattr(self, "budget", None)
        if budget is not None:
            budget.cancel()

    def _out_of_time(self, cancel: CancelToken) -> None:
        """The deadline: stop as on an interrupt (subagents too), the reason being the deadline."""
        self._stop_now(cancel, "deadline")
        self.budget.cancel()

    def _stop_now(self, cancel: CancelToken, reason: str) -> None:
        cancel.cancel(reason)
        sandbox = self.dispatcher.ctx.sandbox
        if sandbox is not None:
            sandbox.interrupt()

    # -- the loop -------------------------------------------------------------
    def run(self, prompt: str, *, first_tool_choice: str | dict[str, Any] | None = None,
            budget: Budget | None = None) -> RunOutcome:
        """Work ``prompt`` to an end; ``first_tool_choice`` overrides the agent's for this run.

        ``budget`` is a subagent's reservation from its parent's budget; a
        top-level run gets one from its limits.  Subagents this run spawns
        reserve from it, and cancelling it (interrupt) cancels them too.
        """
        run = self._begin(prompt, first_tool_choice, budget)
        try:
            while True:
                self.step(run)
        except StopRun as stop:
            return self._end(run, stop)
        finally:
            run.timer.cancel()
            self.running = False

    def step(self, run: _Run) -> None:
        """One model turn and the calls it made."""
        self.execute(run, self.query(run))

    def query(self, run: _Run) -> list[tuple[str, ToolCall]]:
        """Ask the model for its next turn and record it; ``StopRun`` at a limit or when it answers."""
        self._check_cancel()
        self._drain_steers(run.id)
        self._check_limits(run)
        # One request id per turn, kept by the client's retries of it: the model side's
        # records of this turn all join the ModelTurn below (docs/event-log.md, the join).
        request_id = f"{run.id}.{run.turns + 1}"
        reply, waited_ms = self._ask(run.turns + 1, request_id)
        run.turns += 1  # counted once a reply came: a request never sent is not a turn
        usage = reply.usage
        if usage is not None:
            run.prompt_tokens += usage.prompt_tokens
            run.completion_tokens += usage.completion_tokens
        self.budget.charge(tokens=usage.prompt_tokens + usage.completion_tokens if usage else 0, turns=1)
        calls = [(f"{run.id}.{run.turns}.{i}", c) for i, c in enumerate(reply.tool_calls)]
        self.session.append(ModelTurn(
            session_id=self.session.id, run_id=run.id, turn=run.turns, text=reply.text,
            tool_calls=[TurnToolCall(id=cid, name=c.name, arguments=c.arguments) for cid, c in calls],
            finish_reason=reply.finish_reason,
            usage=TurnUsage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)
            if usage else None, duration_ms=round(waited_ms, 3), request_id=request_id,
            retries=list(reply.retries)))
        if not calls:
            run.answer = reply.text
            raise StopRun("done", "the model finished" + (
                " (its reply was cut at the token limit)" if reply.finish_reason == "length" else ""))
        return calls

    def execute(self, run: _Run, calls: list[tuple[str, ToolCall]]) -> None:
        """Run the calls in order (consecutive ``task`` calls together); ``StopRun`` on repeats."""
        for batch in _batches(calls):
            if self._cancel.cancelled:
                return  # the fold answers the calls left: "not run"
            if len(batch) == 1:
                self._call(*batch[0])
            else:  # several task calls in one reply run concurrently, sharing what is left fairly
                self.budget.expect(len(batch))
                with ThreadPoolExecutor(len(batch), thread_name_prefix="abhed-task") as pool:
                    list(pool.map(lambda item: self._call(*item), batch))
                self.budget.expect(0)
            self._check_repeats()

    # -- pieces ---------------------------------------------------------------
    def _begin(self, prompt: str, first_tool_choice: str | dict[str, Any] | None,
               budget: Budget | None) -> _Run:
        """Record ``run_started`` and the prompt; arm the deadline."""
        self._cancel = cancel = CancelToken()
        self.compactor.reset()
        self.budget = budget or Budget(self.limits.max_tokens, self.limits.max_turns,
                                       self.limits.deadline_s)
        self.budget.on_cancel(lambda: self._stop_now(cancel, "cancelled with its parent task"))
        # The deadline stops what runs now, as an interrupt does: the model
        # stream, and this agent's shell commands (their output so far kept).
        timer = threading.Timer(min(self.limits.deadline_s, max(0.0, self.budget.left_seconds())),
                                self._out_of_time, args=(cancel,))
        timer.daemon = True
        run = _Run("r-" + secrets.token_hex(4), timer)
        self.run_id = self.dispatcher.gate.run_id = run.id  # approval events name their run
        self._run_tool_choice = first_tool_choice or self.first_tool_choice
        self.running = True
        timer.start()
        gate = self.dispatcher.gate
        self.session.append(RunStarted(
            session_id=self.session.id, run_id=run.id, provider=self.provider.name,
            model=self.provider.model, mode=gate.engine.mode, mode_chosen_by=gate.chosen_by,
            limits=self.limits.model_dump(mode="json"),
            sampling=dict(getattr(self.provider, "sampling", {}) or {}),
            tools=[s["function"]["name"] for s in self.specs],
            system_prompt_sha256=self.system_prompt.sha256,
            instructions_file=self.system_prompt.instructions_file, resumed=self._resumed))
        self._resumed = False
        self._user(run.id, prompt, "prompt")
        return run

    def _check_limits(self, run: _Run) -> None:
        """``StopRun`` when the run (or, for a subagent, its reservation) has no turn or token left."""
        b = self.budget
        if b.parent is not None and (b.left_turns() <= 0 or b.left_tokens() <= 0):
            raise StopRun("budget", f"{BUDGET_LIMIT_REACHED}: this subagent used its reserved "
                          f"{b.turns} turns / {b.tokens} tokens")
        if run.turns >= self.limits.max_turns or b.left_turns() <= 0:
            raise StopRun("max_turns", f"stopped after {run.turns} model turns (limit max_turns="
                          f"{self.limits.max_turns}, subagents' turns included); raise it or split "
                          "the task")
        if b.left_tokens() <= 0:
            raise StopRun("max_tokens", f"stopped after {b.tokens - b.left_tokens()} tokens, "
                          f"subagents' included (limit max_tokens={self.limits.max_tokens})")

    def _check_repeats(self) -> None:
        repeats, tool = self.history.repeated_failures()
        limit = self.limits.max_repeated_failures
        if limit and repeats >= limit:
            raise StopRun("repeated_failure", (
                f"stopped: the same {tool} call failed {repeats} times in a row (limit "
                f"loop.max_repeated_failures={limit}). Look at the last error, change the task or "
                "the policy, and prompt again."))

    def _check_cancel(self) -> None:
        if self._cancel.cancelled:
            reason = self._cancel.reason
            if reason == "deadline":
                raise StopRun("deadline", f"stopped at the wall-clock limit (deadline_s="
                              f"{self.limits.deadline_s:g})")
            raise StopRun("interrupted", f"interrupted ({reason})")

    def _user(self, run_id: str, text: str, kind: str) -> None:
        self.session.append(UserMessage(session_id=self.session.id, run_id=run_id,
                                        kind="steer" if kind == "steer" else "prompt", text=text))

    def _drain_steers(self, run_id: str) -> None:
        with self._lock:
            steers, self._steers = self._steers, []
        for text in steers:
            self._user(run_id, text, "steer")

    def _ask(self, turn: int, request_id: str) -> tuple[ModelReply, float]:
        tool_choice = self._run_tool_choice if turn == 1 else None
        sampling: dict[str, Any] = {}
        if self.limits.max_completion_tokens is not None:
            sampling["max_tokens"] = self.limits.max_completion_tokens
        messages = self._fit(self.history.outgoing())
        outgoing = self.before_send(messages) if self.before_send else messages
        request = ChatRequest(messages=outgoing, tools=self.specs, tool_choice=tool_choice,
                              sampling=sampling, stream=True, session_id=self.session.id,
                              request_id=request_id)
        t0 = time.perf_counter()
        with self._model_request():
            reply = self.provider.complete(request, on_delta=self.on_delta, cancel=self._cancel)
            if reply.usage is not None:
                self.compactor.calibrate(messages, self.specs, reply.usage.prompt_tokens)
        return reply, (time.perf_counter() - t0) * 1000

    @contextmanager
    def _model_request(self) -> Iterator[None]:
        """Around a request to the model (a turn, or compaction's summary) under the run's
        cancel token: a deadline or an interrupt ends the run, a failed request too."""
        try:
            yield
        except RequestCancelled:
            self._check_cancel()
            raise StopRun("interrupted", "interrupted") from None
        except ModelStreamLost as exc:
            # Tokens had come back: never retried, never silent; the event names the loss.
            raise StopRun("model_stream_lost", str(exc), retries=exc.retries) from None
        except ProviderError as exc:
            raise StopRun("provider_error", str(exc), retries=exc.retries) from None
        except Exception:
            # A cancel shuts the socket down under a read; whatever the HTTP
            # stack then raises (httpx's StreamClosed, say) is the interrupt.
            if self._cancel.cancelled:
                self._check_cancel()
            raise

    # -- context budget ---------------------------------------------------------
    def _fit(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Compact before a request that would pass the threshold; end the run if it cannot fit."""
        c = self.compactor
        if not c.over(c.estimate(messages, self.specs)):
            return messages
        with self._model_request():  # a summary is a model request: the deadline stops it
            self._compact("auto", self._cancel)
        messages = self.history.outgoing()
        tokens = c.estimate(messages, self.specs)
        room = (c.context_tokens or 0) - (self.limits.max_completion_tokens or 0)
        if c.context_tokens is not None and tokens >= room:
            raise StopRun("context_full", (
                f"the conversation needs about {tokens} tokens and the model's context is "
                f"{c.context_tokens}" + (f"; {c.tripped}" if c.tripped else "")
                + ". Start a new session, or give the model more context (loop.context_tokens)."))
        return messages

    def compact(self, trigger: str = "manual") -> Compacted | None:
        """Mask old outputs (then summarise if needed) and record it; None if none would save.

        Called before a request that would not fit (``auto``), or by a person
        (rpc ``compact``, the TUI's ``/compact``) between runs; when it records
        nothing, ``self.compactor.why`` says why.
        """
        return self._compact(trigger, None)

    def _compact(self, trigger: str, cancel: CancelToken | None) -> Compacted | None:
        history, specs = self.history, self.specs
        event = self.compactor.compact(
            history, specs, provider=self.provider, artifacts=self.dispatcher.ctx.artifacts,
            session_id=self.session.id, run_id=self.run_id,
            trigger="manual" if trigger == "manual" else "auto",
            measure=lambda draft: self.compactor.estimate(history.outgoing(draft), specs),
            cancel=cancel)
        if event is not None:
            self.session.append(event)
        return event

    def _call(self, call_id: str, call: ToolCall) -> ToolResult:
        cancel = self._cancel  # this run's: an interrupt after admission starts nothing
        return self.dispatcher.call_text(call.name, call.arguments, call_id=call_id, source="model",
                                         expected=self.signatures.get(call.name, ""),
                                         cancelled=lambda: cancel.cancelled)

    def _end(self, run: _Run, stop: StopRun) -> RunOutcome:
        # Calls the model made that did not run are answered by the fold at run_ended.
        self.session.append(RunEnded(
            session_id=self.session.id, run_id=run.id, reason=stop.reason, message=stop.message,
            turns=run.turns, prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens, answer=run.answer, retries=list(stop.retries)))
        return RunOutcome(run.id, stop.reason, stop.message, run.answer, run.turns)
