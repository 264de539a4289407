"""Abhed's events as ACP session updates: tool calls, diffs, plan entries, messages.

One pure function per thing the editor shows, so the live stream and the
replay of a loaded session say a call the same way.  The words (a call's
title, how it ended) are ``appliance.events``' own, the ones every door uses.

An ACP diff is old and new *text*; Abhed's tools give a unified diff (the
write/edit preview before a call, ``details["diff"]`` after it), so each hunk
becomes one diff item: its context and removed lines are the old text, its
context and added lines the new, and its first new line the location the
editor jumps to.
"""

from __future__ import annotations

import json
import re
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ContentToolCallContent,
    CurrentModeUpdate,
    FileEditToolCallContent,
    PlanEntry,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UserMessageChunk,
)

from appliance.events import (
    ActionEvent,
    ApprovalEvent,
    Compacted,
    Event,
    ModelTurn,
    ObservationEvent,
    PlanUpdated,
    PolicyDecision,
    RunEnded,
    TodoUpdated,
    UserMessage,
    call_outcome,
    call_summary,
    show,
    status_lines,
)

__all__ = ["MAX_TEXT_CHARS", "Update", "diff_items", "event_updates", "kind_of", "locations_of",
           "plan_text", "text", "title_of"]

#: A tool's output shown in the editor is cut here (the whole output is in the event log and,
#: when a tool cut it, a session artifact): an editor panel is not where a 1 MB log is read.
MAX_TEXT_CHARS = 20_000

Update = (AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | ToolCallStart
          | ToolCallProgress | AgentPlanUpdate | CurrentModeUpdate | AvailableCommandsUpdate)

_KINDS: dict[str, ToolKind] = {"read": "read", "write": "edit", "edit": "edit", "glob": "search",
                               "grep": "search", "bash": "execute", "plan": "think",
                               "todo": "think", "task": "think"}
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_TODO_STATUS = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}


def text(value: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=value)


def _bounded(value: str, limit: int = MAX_TEXT_CHARS) -> str:
    if len(value) <= limit:
        return value
    return value[:limit] + f"\n[cut at {limit:,} of {len(value):,} characters here; the whole " \
                           "output is in the session's event log]"


def kind_of(tool: str) -> ToolKind:
    """The ACP kind the editor picks an icon by; an MCP or extension tool is ``other``."""
    return _KINDS.get(tool, "other")


def title_of(tool: str, args: Any, *, subagent: bool = False) -> str:
    """``bash pytest -q``, ``edit /ws/a.py``: the tool and the one argument that says what it does."""
    summary = call_summary(tool, args, width=160)
    return ("subagent: " if subagent else "") + (f"{tool} {summary}" if summary else tool)


def locations_of(tool: str, args: Any) -> list[ToolCallLocation]:
    """The file a call touches, so the editor can follow it (``read``'s first line too)."""
    if not isinstance(args, dict) or not isinstance(args.get("path"), str):
        return []
    path = args["path"]
    if not path.startswith("/"):
        return []  # refused by the path rules; nothing to jump to
    line = args.get("offset") if tool == "read" else None
    if isinstance(line, int) and not isinstance(line, bool) and line >= 1:
        return [ToolCallLocation(path=path, line=line)]
    return [ToolCallLocation(path=path)]


def diff_items(path: str, unified: str) -> tuple[list[FileEditToolCallContent], list[int]]:
    """Each hunk of ``unified`` as an ACP diff (old text, new text), and its first changed line.

    A diff against ``/dev/null`` (a new file) has no old text.  A diff cut by
    ``tools``' bound ends at the cut: its last hunk is shown as far as it goes.
    """
    items: list[FileEditToolCallContent] = []
    lines: list[int] = []
    new_file = False
    old: list[str] | None = None
    new: list[str] = []
    at, changed = 1, False

    def close() -> None:
        if old is not None:
            items.append(FileEditToolCallContent(
                type="diff", path=path, old_text=None if new_file else "".join(old),
                new_text="".join(new)))

    for line in unified.splitlines(keepends=True):
        if line.startswith("--- ") and old is None:
            new_file = line.rstrip("\n") == "--- /dev/null"
            continue
        if line.startswith("+++ ") and old is None:
            continue
        m = _HUNK.match(line)
        if m:
            close()
            old, new = [], []
            at, changed = max(1, int(m.group(2))), False
            continue
        if old is None or line.startswith("\\"):
            continue
        if line.startswith("[diff truncated]"):
            break
        mark, body = line[:1], line[1:]
        if mark in ("-", "+") and not changed:
            lines.append(at)  # the hunk's first changed line, past its context: where to jump
            changed = True
        if mark in (" ", "-"):
            old.append(body)
        if mark in (" ", "+"):
            new.append(body)
        if mark == " ":
            at += 1
    close()
    return items, lines


def plan_text(e: PlanUpdated) -> str:
    """The plan as the agent's message: its title, numbered steps and notes."""
    body = status_lines([(s.status, s.step) for s in e.steps], numbered=True)
    return f"**Plan: {e.title}**\n\n{body}" + (f"\n\n{e.notes}" if e.notes else "") + "\n"


def _args_text(tool: str, args: Any) -> str:
    if tool == "bash" and isinstance(args, dict) and isinstance(args.get("command"), str):
        return "```sh\n" + str(args["command"]) + "\n```"
    try:
        return "```json\n" + json.dumps(args, ensure_ascii=False, indent=2)[:MAX_TEXT_CHARS] + "\n```"
    except (TypeError, ValueError):
        return _bounded(str(args))


def start(e: ActionEvent, *, subagent: bool, preview: str | None) -> ToolCallStart:
    """A call as the model asked for it, before policy or the tool saw it (status pending)."""
    content: list[Any] = []
    locations = locations_of(e.tool, e.args)
    if preview and locations:
        items, first = diff_items(locations[0].path, preview)
        content.extend(items)
        if first and e.tool == "edit":
            locations = [ToolCallLocation(path=locations[0].path, line=first[0])]
    elif e.tool == "bash":
        content.append(ContentToolCallContent(type="content", content=text(_args_text(e.tool, e.args))))
    return ToolCallStart(session_update="tool_call", tool_call_id=e.call_id,
                         title=title_of(e.tool, e.args, subagent=subagent), kind=kind_of(e.tool),
                         status="pending", locations=locations or None, content=content or None,
                         raw_input=e.args)


def finish(e: ObservationEvent) -> ToolCallProgress:
    """How a call ended: completed or failed (refused, killed, timed out are failed, with why)."""
    out = call_outcome(e)
    r = e.result
    content: list[Any] = []
    locations: list[ToolCallLocation] | None = None
    path = r.details.get("path")
    diff = r.details.get("diff")
    if isinstance(path, str) and isinstance(diff, str) and diff:
        items, first = diff_items(path, diff)
        content.extend(items)
        if first:
            locations = [ToolCallLocation(path=path, line=first[0])]
    elif e.tool in ("write", "edit") and r.ok and r.details.get("created") and isinstance(path, str):
        locations = [ToolCallLocation(path=path, line=1)]
    said = r.content if r.ok or not r.error else r.error.message
    if out.status != "ok":
        said = f"{e.tool}: {out.label} ({out.timing})\n{said}"
    if e.tool == "bash" and said:
        said = "```\n" + _bounded(said) + "\n```"
    if said:
        content.append(ContentToolCallContent(type="content", content=text(_bounded(said))))
    return ToolCallProgress(session_update="tool_call_update", tool_call_id=e.call_id,
                            status="completed" if out.status == "ok" else "failed",
                            content=content or None, locations=locations,
                            raw_output={"ok": r.ok, "outcome": out.label,
                                        "duration_ms": e.duration_ms})


def plan_entries(e: TodoUpdated) -> AgentPlanUpdate:
    """The todo list as the protocol's plan: every entry, its status in step."""
    return AgentPlanUpdate(session_update="plan", entries=[
        PlanEntry(content=i.content, priority="medium",
                  status=_TODO_STATUS.get(i.status, "pending"))  # type: ignore[arg-type]
        for i in e.items])


def _message(value: str) -> AgentMessageChunk:
    return AgentMessageChunk(session_update="agent_message_chunk", content=text(value))


def event_updates(event: Event, *, top: bool, replay: bool,
                  preview: str | None = None) -> list[Update]:
    """What the editor is told of ``event``.

    ``top``: the event is the session's own (not a subagent's: its calls are
    shown, its chatter is not).  ``replay``: a loaded session's history, where
    the model's text and the user's prompts are told from the events (live,
    the text arrived as deltas and the prompt came from the editor).
    ``preview``: for an ``action`` of write or edit, the diff it would make.
    """
    match event:
        case UserMessage() if replay and top:
            return [UserMessageChunk(session_update="user_message_chunk", content=text(event.text))]
        case ModelTurn() if replay and top and event.text:
            return [_message(event.text)]
        case ActionEvent():
            return [start(event, subagent=not top, preview=preview)]
        case PolicyDecision() if event.verdict == "allow":
            return [ToolCallProgress(session_update="tool_call_update",
                                     tool_call_id=event.call_id, status="in_progress")]
        case ApprovalEvent() if event.decision == "allow":
            return [ToolCallProgress(session_update="tool_call_update",
                                     tool_call_id=event.call_id, status="in_progress")]
        case ObservationEvent():
            return [finish(event)]
        case TodoUpdated() if top:
            return [plan_entries(event)]
        case PlanUpdated() if top:
            return [_message("\n\n" + plan_text(event))]
        case Compacted() if top:
            return [AgentThoughtChunk(session_update="agent_thought_chunk",
                                      content=text(show(event).title + "\n"))]
        case RunEnded() if top and event.reason != "done":
            return [_message("\n\n■ " + show(event).title + "\n")]
        case _:
            return []
