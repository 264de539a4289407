"""One probe conversation: ask the model, dispatch its calls, record everything.

The probe does not use the agent loop: a recovery case must start from a
conversation that already holds the model's own failing call, and a wire case
must send the same request twice (streamed and not) without running anything.
What it does use is the same path every tool call takes (the session's
dispatcher: policy, sandbox, events) and the same tool-result wrapping, so
the model reads exactly what it would read in a real session, and the event
log shows every request, reply and call as it would for any run.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from appliance._dispatch import Dispatcher
from appliance._session import Session
from appliance.events import (
    Event,
    ModelTurn,
    RunEnded,
    RunStarted,
    StoredEvent,
    TurnToolCall,
    TurnUsage,
    UserMessage,
)
from appliance.loop import wrap_result
from models import CancelToken, ChatRequest, ModelReply, Provider, ToolCall
from tools import ToolResult

__all__ = ["CallRecord", "Conversation", "LockedSession", "failed_code"]


class LockedSession(Session):
    """A session many case threads append to: one SQLite connection, one writer at a time."""

    _lock = threading.Lock()

    def append(self, event: Event) -> StoredEvent:
        with self._lock:
            return super().append(event)


def failed_code(result: ToolResult) -> str:
    """Why a result counts as failed ('' when it did not): the error code, a non-zero exit, a cut."""
    if result.error is not None:
        return result.error.code
    exit_code = result.details.get("exit_code")
    if isinstance(exit_code, int) and exit_code != 0:
        return "exit_nonzero"
    end, total = result.details.get("end_line"), result.details.get("total_lines")
    if result.truncated or (isinstance(end, int) and isinstance(total, int) and end < total):
        return "truncated"
    return ""


@dataclass
class CallRecord:
    """A call as made and what came of it."""

    name: str
    arguments: str
    args: Any
    source: str
    result: ToolResult | None = None

    @property
    def key(self) -> str:
        """Name and canonical arguments: two calls with the same key are the same call."""
        try:
            canon = json.dumps(self.args, sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError):
            canon = self.arguments
        return f"{self.name} {canon}"

    @property
    def code(self) -> str:
        return "" if self.result is None else failed_code(self.result)


@dataclass
class Conversation:
    """Messages of one case run, its provider, dispatcher and event session."""

    session: Session
    provider: Provider
    run_id: str
    system: str
    specs: list[dict[str, Any]]
    dispatcher: Dispatcher | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    max_tokens_cap: int | None = None  # the provider's configured max_tokens, if any
    cancel: CancelToken | None = None  # set on Ctrl-C: a request in flight is closed at once
    messages: list[dict[str, Any]] = field(default_factory=list)
    replies: list[ModelReply] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    turns: int = 0

    def start(self, prompt: str, *, title: str) -> None:
        self.messages = [{"role": "system", "content": self.system},
                         {"role": "user", "content": prompt}]
        self.session.append(RunStarted(
            session_id=self.session.id, run_id=self.run_id, provider=self.provider.name,
            model=self.provider.model, mode="auto", limits={"probe_case": title},
            sampling=dict(self.sampling), tools=[s["function"]["name"] for s in self.specs],
            system_prompt_sha256=hashlib.sha256(self.system.encode()).hexdigest()))
        self.session.append(UserMessage(session_id=self.session.id, run_id=self.run_id,
                                        text=prompt))

    def ask(self, *, stream: bool, tool_choice: str | dict[str, Any] | None = None,
            max_tokens: int = 1024, keep: bool = True) -> ModelReply:
        """One request; the reply is recorded, and added to the conversation when ``keep``.

        A ``max_tokens`` the operator configured for the provider caps the case's own: the
        agent will never get more, so the model is judged as the site bounds it (a small
        model bounded to 200 tokens, unbounded, rambles for minutes per case on a CPU).
        """
        sampling = dict(self.sampling)
        cap = self.max_tokens_cap
        sampling["max_tokens"] = min(max_tokens, cap) if cap is not None else max_tokens
        request = ChatRequest(messages=list(self.messages), tools=self.specs,
                              tool_choice=tool_choice, sampling=sampling, stream=stream)
        t0 = time.perf_counter()
        reply = self.provider.complete(request, cancel=self.cancel)
        waited = (time.perf_counter() - t0) * 1000
        self.turns += 1
        if reply.usage is not None:
            self.prompt_tokens += reply.usage.prompt_tokens
            self.completion_tokens += reply.usage.completion_tokens
        self.session.append(ModelTurn(
            session_id=self.session.id, run_id=self.run_id, turn=self.turns, text=reply.text,
            tool_calls=[TurnToolCall(id=f"{self.run_id}.{self.turns}.{i}", name=c.name,
                                     arguments=c.arguments) for i, c in enumerate(reply.tool_calls)],
            finish_reason=reply.finish_reason,
            usage=TurnUsage(prompt_tokens=reply.usage.prompt_tokens,
                            completion_tokens=reply.usage.completion_tokens) if reply.usage else None,
            duration_ms=round(waited, 3)))
        self.replies.append(reply)
        if keep:
            self._assistant(reply.text, reply.tool_calls)
        return reply

    def _assistant(self, text: str, calls: tuple[ToolCall, ...]) -> None:
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            msg["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in calls]
        self.messages.append(msg)

    def inject(self, name: str, args: dict[str, Any], index: int) -> CallRecord:
        """Put a call in the conversation as the model's own, and run it (recorded as the probe's)."""
        call = ToolCall(f"probe-{index}", name, json.dumps(args, ensure_ascii=False))
        self._assistant("", (call,))
        return self.dispatch(call, source="probe")

    def dispatch(self, call: ToolCall, *, source: str = "model") -> CallRecord:
        """Run one call through the session's dispatcher and add its result to the conversation."""
        assert self.dispatcher is not None
        call_id = f"{self.run_id}.{self.turns}.{call.id}"
        try:  # for the probe's own record; the dispatcher parses (and records) the call itself
            args: Any = json.loads(call.arguments) if call.arguments.strip() else {}
        except (ValueError, RecursionError):
            args = None
        record = CallRecord(call.name, call.arguments, args, source)
        result = self.dispatcher.call_text(call.name, call.arguments, call_id=call_id, source=source)
        record.result = result
        self.calls.append(record)
        self.tool_message(call, result)
        return record

    def tool_message(self, call: ToolCall, result: ToolResult) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call.id,
                              "content": wrap_result(call.name, result)})

    def replace_last_result(self, content: str) -> None:
        """The terse variant: the last tool message says only ``content``."""
        record = self.calls[-1]
        assert record.result is not None
        terse = record.result.model_copy(update={"content": content})
        self.messages[-1]["content"] = wrap_result(record.name, terse)

    def end(self, answer: str | None, message: str, *, failed: bool = False,
            interrupted: bool = False) -> None:
        self.session.append(RunEnded(
            session_id=self.session.id, run_id=self.run_id,
            reason="interrupted" if interrupted else "provider_error" if failed else "done",
            message=message,
            turns=self.turns, prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens, answer=answer))


