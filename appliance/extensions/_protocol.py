"""What an extension may say, read strictly.  No field can mean "allow".

A reply is reduced to :class:`Reply`, whose fields can only make things
stricter (block, ask), rewrite, drop, add or log.  Any other field, ``allow``
and ``approve`` included, is ignored and logged, so an extension that tries to
permit something is visible in the audit trail and has no effect.  A field of
the wrong type is nonsense, and nonsense kills the extension ("no opinion").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FIELDS", "Nonsense", "Reply", "read_reply"]

# Reply fields Abhed reads, per event (docs/extensions.md lists them).
FIELDS: dict[str, frozenset[str]] = {
    "session_start": frozenset({"log"}),
    "session_end": frozenset({"log"}),
    "tool_call": frozenset({"block", "reason", "ask", "args", "log"}),
    "tool_result": frozenset({"block", "reason", "content", "log"}),
    "before_send": frozenset({"drop", "log"}),
    "system_prompt": frozenset({"append", "log"}),
    "list_tools": frozenset({"tools", "log"}),
    "invoke_tool": frozenset({"result", "error", "log"}),
}


class Nonsense(ValueError):
    """The reply has a known field of the wrong type."""


@dataclass(frozen=True)
class Reply:
    """One extension's reply to one event.  There is deliberately no ``allow``."""

    block: bool = False
    ask: bool = False
    reason: str = ""
    args: dict[str, Any] | None = None
    content: str | None = None
    drop: tuple[int, ...] = ()
    append: str = ""
    tools: tuple[dict[str, Any], ...] = ()
    result: str | None = None
    error: str | None = None
    log: str = ""
    ignored: tuple[str, ...] = field(default=())


def _typed(raw: dict[str, Any], key: str, kind: type) -> Any:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise Nonsense(f"field {key!r} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def read_reply(event: str, raw: dict[str, Any]) -> Reply:
    """Reduce a raw reply to the fields ``event`` honours; raise :class:`Nonsense` on bad types."""
    known = FIELDS[event]
    ignored = tuple(sorted(k for k in raw if k not in known))
    get = {k: v for k, v in raw.items() if k in known}
    block = _typed(get, "block", bool) or False
    ask = _typed(get, "ask", bool) or False
    reason = _typed(get, "reason", str) or ""
    args = _typed(get, "args", dict)
    content = _typed(get, "content", str)
    drop_raw = _typed(get, "drop", list) or []
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in drop_raw):
        raise Nonsense("field 'drop' must be a list of message indexes")
    append = _typed(get, "append", str) or ""
    tools_raw = _typed(get, "tools", list) or []
    if not all(isinstance(t, dict) for t in tools_raw):
        raise Nonsense("field 'tools' must be a list of objects")
    result = get.get("result")
    if result is not None and not isinstance(result, str):
        result = json_text(result)
    error = _typed(get, "error", str)
    log = _typed(get, "log", str) or ""
    return Reply(block=block, ask=ask, reason=reason, args=args, content=content,
                 drop=tuple(drop_raw), append=append, tools=tuple(tools_raw), result=result,
                 error=error, log=log, ignored=ignored)


def json_text(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
