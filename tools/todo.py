"""todo: the model's checklist, the whole list replaced on every call.

The list is working memory that outlives the conversation: the session
records it (``todo_updated`` events), shows it live to the person, and puts
it back in front of the model after a compaction and on resume.  The tool
itself is pure (it checks and echoes the list), so the rule that matters is
enforced here, in code, not in a prompt: while any item is open, exactly
one is ``in_progress``.  A list that breaks a rule changes nothing.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import Field

from tools._result import ToolFailure, ToolResult, success
from tools._tool import Args, Tool, ToolContext

__all__ = ["MAX_ITEMS", "RENDER_MAX_CHARS", "STATUS_MARKS", "Todo", "TodoArgs", "TodoItem",
           "WorkingMemory", "render_todo", "render_todo_bounded"]

#: More items than this is not a checklist a person (or a small model) can follow.
MAX_ITEMS = 100
#: The most a rendered list takes in a result or a reminder (~2k tokens; 100 items of 500
#: characters would be 50k): past it, done items are named by id and long items cut.
RENDER_MAX_CHARS = 8000
_CUT_CONTENT_CHARS = 150
_MAX_CONTENT_CHARS = 500
_MAX_ID_CHARS = 64

TodoStatus = Literal["pending", "in_progress", "done"]
#: How a todo item's or a plan step's status is drawn, for the model and for people (the one
#: table: the tools' own output, ``abhed run``, ``abhed sessions show`` and the TUI use it).
STATUS_MARKS = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "skipped": "[-]"}


class TodoItem(Args):
    id: Annotated[str, Field(min_length=1, max_length=_MAX_ID_CHARS)] = Field(
        description="A short stable id (\"1\", \"tests\"); keep it when the status changes.")
    content: Annotated[str, Field(min_length=1, max_length=_MAX_CONTENT_CHARS)] | None = Field(
        default=None, description="What to do, in one line. Required for a new item; an item "
        "already on the list keeps its content when you leave this out.")
    status: TodoStatus = Field(description="pending | in_progress | done.")


class TodoArgs(Args):
    items: Annotated[list[TodoItem], Field(max_length=MAX_ITEMS)] = Field(
        description="The WHOLE list, every item, each call (it replaces the previous list). "
        "An empty list clears it.")


def render_todo(items: list[dict[str, Any]]) -> str:
    """The list as the model and a person read it: one line per item, in order."""
    if not items:
        return "(the todo list is empty)"
    return "\n".join(f"{STATUS_MARKS.get(str(i.get('status')), '[?]')} {i.get('id')}: {i.get('content')}"
                     for i in items)


def render_todo_bounded(items: list[dict[str, Any]],
                        max_chars: int = RENDER_MAX_CHARS) -> tuple[str, bool]:
    """The list within ``max_chars`` (and whether it had to be shortened).

    Shortened in this order, so what is being worked on stays readable: done
    items named by id only, open items' content cut, then open items by id.
    """
    whole = render_todo(items)
    if len(whole) <= max_chars:
        return whole, False
    done = [str(i.get("id")) for i in items if i.get("status") == "done"]
    lines: list[str] = []
    hidden: list[str] = []
    used = 0
    for i in items:
        if i.get("status") == "done":
            continue
        content = str(i.get("content"))
        if len(content) > _CUT_CONTENT_CHARS:
            content = content[:_CUT_CONTENT_CHARS] + "…"
        line = f"{STATUS_MARKS.get(str(i.get('status')), '[?]')} {i.get('id')}: {content}"
        if hidden or used + len(line) > max_chars // 2:
            hidden.append(str(i.get("id")))
            continue
        lines.append(line)
        used += len(line) + 1
    if hidden:
        lines.append("[ ] also open, not shown: " + ", ".join(hidden))
    if done:
        lines.append("[x] done: " + ", ".join(done))
    lines.append(f"[the whole list is {len(whole)} characters, more than is shown: done items by "
                 "id, long items cut. It is kept whole; to change it send every item again (an "
                 "item you send with only id and status keeps its content)]")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[: max_chars - 40] + "\n[... cut at the list's bound]"
    return text, True


@runtime_checkable
class WorkingMemory(Protocol):
    """The session's current todo list and plan, as the last accepted call left them."""

    def recalled(self, kind: Literal["todo", "plan"]) -> Any: ...


def recall(ctx: ToolContext, kind: Literal["todo", "plan"]) -> Any:
    """What the session holds now for ``kind`` (None: nothing, or no session to ask)."""
    ledger = ctx.ledger
    return ledger.recalled(kind) if isinstance(ledger, WorkingMemory) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


class Todo(Tool):
    name = "todo"
    description = (
        "Keep a checklist for multi-step work: call it at the start of any task with more than "
        "two steps, and again each time a step starts or finishes. Send the WHOLE list every "
        "time: items [{id, content, status}], status pending | in_progress | done. While any "
        "item is open, exactly ONE is in_progress (the one you are doing now); mark it done "
        "before starting the next. The list is shown to the user live and survives the "
        "conversation being compacted, so keep it current. "
        f"At most {MAX_ITEMS} items; an empty list clears it. An item already on the list keeps "
        "its content if you send only its id and status."
    )
    args_model = TodoArgs
    capabilities = frozenset()
    mutates = False

    def run(self, args: TodoArgs, ctx: ToolContext) -> ToolResult:
        items = args.items
        dup = sorted(i for i, n in Counter(it.id for it in items).items() if n > 1)
        if dup:
            raise ToolFailure(
                "invalid_arguments",
                f"Item ids must be unique; repeated: {', '.join(repr(d) for d in dup[:10])}. "
                "Give each item its own id. The todo list was not changed.")
        active = [it.id for it in items if it.status == "in_progress"]
        open_ = [it.id for it in items if it.status != "done"]
        if len(active) > 1:
            raise ToolFailure(
                "invalid_arguments",
                f"{len(active)} items are in_progress ({', '.join(repr(a) for a in active[:10])}); "
                "exactly one may be. Keep the one you are working on now as in_progress and set "
                "the others back to pending (or done, if finished). The todo list was not changed.",
                details={"in_progress": active})
        if open_ and not active:
            raise ToolFailure(
                "invalid_arguments",
                f"{len(open_)} items are open but none is in_progress; exactly one must be. Mark "
                f"the item you are starting now (e.g. {open_[0]!r}) as in_progress. The todo list "
                "was not changed.")
        current = recall(ctx, "todo")
        known = {str(i.get("id")): str(i.get("content")) for i in current or []
                 if isinstance(i, dict)}
        missing = [it.id for it in items if it.content is None and _one_line(it.id) not in known]
        if missing:
            raise ToolFailure(
                "invalid_arguments",
                f"Item {missing[0]!r} has no content and is not on the current list; give "
                "content for a new item (only an item already on the list keeps its content "
                "when you leave it out). The todo list was not changed.")
        stored = [{"id": _one_line(it.id), "status": it.status,
                   "content": _one_line(it.content) if it.content is not None
                   else known[_one_line(it.id)]} for it in items]
        stored = [{"id": i["id"], "content": i["content"], "status": i["status"]} for i in stored]
        done = sum(1 for it in items if it.status == "done")
        facts = {"open": len(open_), "done": done, "in_progress": active[0] if active else None}
        text, cut = render_todo_bounded(stored)
        if current is not None and stored == current:
            return success("Todo list unchanged: it is the same as the current list.\n" + text,
                           truncated=cut, todo=stored, changed=False, **facts)
        if not items:
            summary = "Todo list cleared."
        elif not open_:
            summary = f"Todo list updated: all {done} items done."
        else:
            summary = (f"Todo list updated: {done} done, {len(open_) - 1} pending, now working on "
                       f"{active[0]!r}.")
        return success(summary + "\n" + text, truncated=cut, todo=stored, changed=True, **facts)
