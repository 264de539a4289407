"""plan: write or update the structured plan for the current task.

Like ``todo`` this is working memory the session keeps as events and puts
back in front of the model after a compaction and on resume.  It is the one
thing a run in plan mode produces: plan mode is read-only, and ``plan`` does
not touch the workspace, so it is allowed there.  Leaving plan mode to carry
the plan out is the user's decision (TUI or rpc), never the model's, so this
tool has no "approve" or "exit" argument.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from tools._result import ToolFailure, ToolResult, success
from tools._tool import Args, Tool, ToolContext
from tools.todo import STATUS_MARKS, recall

__all__ = ["MAX_STEPS", "Plan", "PlanArgs", "PlanStep", "render_plan"]

MAX_STEPS = 50
_MAX_NOTES_CHARS = 8000


class PlanStep(Args):
    step: Annotated[str, Field(min_length=1, max_length=1000)] = Field(
        description="What this step does, in a sentence.")
    status: Literal["pending", "in_progress", "done", "skipped"] = Field(
        default="pending", description="pending | in_progress | done | skipped.")


class PlanArgs(Args):
    title: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="The task the plan is for, in one line.")
    steps: Annotated[list[PlanStep], Field(min_length=1, max_length=MAX_STEPS)] = Field(
        description="Every step, in order (the whole plan replaces the previous one).")
    notes: Annotated[str, Field(max_length=_MAX_NOTES_CHARS)] = Field(
        default="", description="Findings, risks, files involved, open questions.")


def render_plan(plan: dict[str, Any]) -> str:
    """The plan as the model and a person read it."""
    steps = plan.get("steps") or []
    lines = [f"Plan: {plan.get('title', '')}"]
    for n, s in enumerate(steps, 1):
        lines.append(f"{n}. {STATUS_MARKS.get(str(s.get('status')), '[?]')} {s.get('step')}")
    notes = str(plan.get("notes") or "").strip()
    if notes:
        lines.append("Notes: " + notes)
    return "\n".join(lines)


class Plan(Tool):
    name = "plan"
    description = (
        "Write or update the plan for the current task: a title, the steps in order (each "
        "pending | in_progress | done | skipped) and notes (findings, risks, files involved). "
        "Send the whole plan each time; it replaces the previous one. Use it before a change "
        "that touches several files, and in plan mode, where you explore read-only and this "
        "plan is what you hand the user. The plan survives the conversation being compacted. "
        f"At most {MAX_STEPS} steps and one step in_progress."
    )
    args_model = PlanArgs
    capabilities = frozenset()
    mutates = False

    def run(self, args: PlanArgs, ctx: ToolContext) -> ToolResult:
        active = [n for n, s in enumerate(args.steps, 1) if s.status == "in_progress"]
        if len(active) > 1:
            raise ToolFailure(
                "invalid_arguments",
                f"Steps {', '.join(map(str, active[:10]))} are all in_progress; at most one may be. "
                "Keep the step you are doing now as in_progress. The plan was not changed.")
        stored = {"title": " ".join(args.title.split()),
                  "steps": [{"step": " ".join(s.step.split()), "status": s.status} for s in args.steps],
                  "notes": args.notes.strip()}
        done = sum(1 for s in args.steps if s.status in ("done", "skipped"))
        if stored == recall(ctx, "plan"):
            return success("Plan unchanged: it is the same as the current plan.\n"
                           + render_plan(stored), plan=stored, changed=False)
        return success(f"Plan recorded ({len(args.steps)} steps, {done} finished).\n"
                       + render_plan(stored), plan=stored, changed=True)
