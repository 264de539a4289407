"""One tool call through the whole path: record, judge, run, record, return.

This is the same path for the agent loop, ``abhed tool``, ``abhed rpc`` and
subagents; nothing reaches a tool any other way, and nothing else writes an
``action`` or ``observation`` event.  The policy gate is required: a caller
that wants no restrictions passes :meth:`appliance.policy.Gate.permissive`,
which still runs the real path.

Order of events for one call (docs/architecture.md explains why the action
comes first, before validation, unlike the drawing in docs/design.md)::

    action -> policy_decision -> [approval] -> (run) -> observation
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from appliance._session import Session
from tools import NOT_STARTED, Tool, ToolContext, ToolResult, failure, json_safe, run_tool

if TYPE_CHECKING:
    from appliance.policy import Gate

__all__ = ["Dispatcher"]


_MAX_REPR_CHARS = 10_000
_MAX_RAW_ARGS_CHARS = 4096


def _jsonable(value: Any) -> Any:
    """The arguments as they can be recorded: exact where JSON can hold them.

    Lone surrogates (JSON allows ``"\\ud800"``, UTF-8 does not) become
    U+FFFD; values JSON cannot express are recorded as a bounded ``repr``;
    nesting too deep to serialise is recorded as a note saying so.
    """
    try:
        json.dumps(value)
    except RecursionError:
        return "[arguments nested too deeply to record]"
    except (TypeError, ValueError):
        try:
            text = repr(value)
        except (RecursionError, ValueError):
            return "[arguments that could not be represented]"
        return json_safe(text[:_MAX_REPR_CHARS])
    return json_safe(value)


class Dispatcher:
    """Runs tool calls for one session; every call becomes its persisted events."""

    def __init__(self, session: Session, tools: dict[str, Tool], ctx: ToolContext,
                 gate: Gate) -> None:
        self.session = session
        self.tools = tools
        self.ctx = ctx
        self.gate = gate
        #: A front end watching calls run (the TUI): told (call id, output so far) by tools
        #: that stream (bash), as it comes.  Transient, like the model's text deltas: what
        #: is recorded is the observation.
        self.on_progress: Callable[[str, str], None] | None = None

    def call(self, name: str, args: Any, *, call_id: str | None = None,
             source: str = "model", cancelled: Callable[[], bool] | None = None) -> ToolResult:
        """Run ``name`` with already-parsed ``args`` (a JSON value of any shape).

        ``cancelled`` tells whether the run this call belongs to was interrupted.  It is
        asked once the call is admitted, just before the tool starts: an interrupt that
        came while the call was being admitted (the policy, an extension, a person asked
        to approve) finds nothing running to stop, so the call must not start after it."""
        call_id = call_id or "c-" + secrets.token_hex(6)
        self.session.record_call(call_id, name, _jsonable(args), source)
        started = time.perf_counter()
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools))
            result = failure(
                "unknown_tool",
                f"There is no tool named {name!r}. Available tools: {known}. Call one of those.",
            )
        else:
            admitted = self.gate.admit(self.session, call_id, tool, args, self.ctx)
            if isinstance(admitted, ToolResult):
                result = admitted
            elif cancelled is not None and cancelled():
                result = failure("not_run", NOT_STARTED)
            else:
                watch = self.on_progress
                result = run_tool(tool, admitted, replace(
                    self.ctx, call_id=call_id, cancelled=cancelled,
                    progress=partial(watch, call_id) if watch is not None else None))
                result = self.gate.finish(call_id, tool, admitted, result)
        elapsed = (time.perf_counter() - started) * 1000
        self.session.record_result(call_id, name, result, round(elapsed, 3),
                                   approval_wait_ms=round(self.gate.waited_ms(call_id), 3))
        return result

    def call_text(self, name: str, arguments: str, *, call_id: str | None = None,
                  source: str = "model", expected: str = "",
                  cancelled: Callable[[], bool] | None = None) -> ToolResult:
        """Run ``name`` with arguments as the model wrote them (JSON text, maybe broken).

        Text that is not JSON is recorded (bounded) and answered with
        ``malformed_arguments``; ``expected`` (the tool's signature) goes in
        that answer so the model can fix its call.
        """
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            call_id = call_id or "c-" + secrets.token_hex(6)
            self.session.record_call(call_id, name, json_safe(arguments[:_MAX_RAW_ARGS_CHARS]), source)
            result = failure(
                "malformed_arguments",
                f"The arguments of your {name or 'tool'} call are not valid JSON "
                f"({exc.__class__.__name__} at character {getattr(exc, 'pos', '?')}). "
                + (f"Expected a JSON object: {expected}. " if expected else "")
                + "Nothing was run; send the call again with a valid JSON object.")
            self.session.record_result(call_id, name, result, 0.0)
            return result
        return self.call(name, args, call_id=call_id, source=source, cancelled=cancelled)
