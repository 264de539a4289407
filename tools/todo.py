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
from typing import Annotated, Any, Literal

from pydantic import Field

from tools._result import ToolFailure, ToolResult, success
from tools._tool import Args, Tool, ToolContext

__all__ = ["MAX_ITEMS", "STATUS_MARKS", "Todo", "TodoArgs", "TodoItem", "render_todo"]

#: More items than this is not a checklist a person (or a small model) can follow.
MAX_ITEMS = 100
_MAX_CONTENT_CHARS = 500
_MAX_ID_CHARS = 64

TodoStatus = Literal["pending", "in_progress", "done"]
#: How a todo item's or a plan step's status is drawn, for the model and for people (the one
#: table: the tools' own output, ``abhed run``, ``abhed sessions show`` and the TUI use it).
STATUS_MARKS = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "skipped": "[-]"}


class TodoItem(Args):
    id: Annotated[str, Field(min_length=1, max_length=_MAX_ID_CHARS)] = Field(
        description="A short stable id (\"1\", \"tests\"); keep it when the status changes.")
    content: Annotated[str, Field(min_length=1, max_length=_MAX_CONTENT_CHARS)] = Field(
        description="What to do, in one line.")
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
        f"At most {MAX_ITEMS} items; an empty list clears it."
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
        stored = [{"id": _one_line(it.id), "content": _one_line(it.content), "status": it.status}
                  for it in items]
        done = sum(1 for it in items if it.status == "done")
        if not items:
            summary = "Todo list cleared."
        elif not open_:
            summary = f"Todo list updated: all {done} items done."
        else:
            summary = (f"Todo list updated: {done} done, {len(open_) - 1} pending, now working on "
                       f"{active[0]!r}.")
        return success(summary + "\n" + render_todo(stored), todo=stored,
                       open=len(open_), done=done, in_progress=active[0] if active else None)
