"""One tool call through the whole path: record, validate, run, record, return.

This is the same path for the agent loop, ``abhed tool`` and ``abhed rpc``;
nothing reaches a tool any other way.  Policy plugs in between the action
event and execution.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from appliance._session import Session
from tools import Tool, ToolContext, ToolResult, run_tool
from tools._result import _json_safe, failure

if TYPE_CHECKING:
    from appliance.policy import Gate

__all__ = ["Dispatcher"]


_MAX_REPR_CHARS = 10_000


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
        return _json_safe(text[:_MAX_REPR_CHARS])
    return _json_safe(value)


class Dispatcher:
    """Runs tool calls for one session; every call becomes two persisted events."""

    def __init__(self, session: Session, tools: dict[str, Tool], ctx: ToolContext,
                 policy: Gate | None = None) -> None:
        self.session = session
        self.tools = tools
        self.ctx = ctx
        self.policy = policy  # None: no policy (tests, trusted one-off calls)

    def call(self, name: str, args: Any, *, call_id: str | None = None,
             source: str = "model") -> ToolResult:
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
        elif self.policy is None:
            result = run_tool(tool, args, replace(self.ctx, call_id=call_id))
        else:
            admitted = self.policy.admit(self.session, call_id, tool, args, self.ctx)
            if isinstance(admitted, ToolResult):
                result = admitted
            else:
                result = run_tool(tool, admitted, replace(self.ctx, call_id=call_id))
                result = self.policy.finish(call_id, tool, admitted, result)
        elapsed = (time.perf_counter() - started) * 1000
        self.session.record_result(call_id, name, result, round(elapsed, 3))
        return result
