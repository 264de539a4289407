"""One tool call through the whole path: record, validate, run, record, return.

This is the same path for the agent loop, ``abhed tool`` and ``abhed rpc``;
nothing reaches a tool any other way.  Policy plugs in between the action
event and execution.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import TYPE_CHECKING, Any

from appliance._session import Session
from tools import Tool, ToolContext, ToolResult, run_tool
from tools._result import failure

if TYPE_CHECKING:
    from appliance.policy import Gate

__all__ = ["Dispatcher"]


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


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
            result = run_tool(tool, args, self.ctx)
        else:
            admitted = self.policy.admit(self.session, call_id, tool, args, self.ctx)
            if isinstance(admitted, ToolResult):
                result = admitted
            else:
                result = run_tool(tool, admitted, self.ctx)
                result = self.policy.finish(call_id, tool, admitted, result)
        elapsed = (time.perf_counter() - started) * 1000
        self.session.record_result(call_id, name, result, round(elapsed, 3))
        return result
