"""What a permission request shows and offers: the TUI approval card's content, for an editor.

The TUI's card (tui/_approval.py) shows what will run exactly as it will run
(a bash command whole, every line; a write or edit as its diff against the
file on disk) and, beside it, the parse's findings: why policy asks, which
commands need the answer, what "always" would store.  An editor gets the
same, as ACP content: the command as a text block, the diff as diff items
(and as unified text, for an editor that shows no diffs in a question), the
findings as text.  The answers are the card's: allow once, allow always (only
when policy offers it, storing exactly the rules named), reject.
"""

from __future__ import annotations

import json

from acp.schema import FileEditToolCallContent, PermissionOption, TextContentBlock

from appliance.policy import ApprovalRequest, ScopedApprovalRequest
from cli.acp._updates import MAX_TEXT_CHARS, diff_items, text

__all__ = ["permission_content", "permission_options"]


def _what_will_run(req: ApprovalRequest, preview: str) -> list[TextContentBlock | FileEditToolCallContent]:
    args = req.args if isinstance(req.args, dict) else {}
    command = args.get("command")
    if req.tool == "bash" and isinstance(command, str):
        lines = command.count("\n") + 1
        whole = f"\n({lines} lines, shown whole)" if lines > 1 else ""
        return [text("```sh\n" + command + "\n```" + whole)]
    path = args.get("path")
    if preview and isinstance(path, str):
        items, _ = diff_items(path, preview)
        return [*items, text("```diff\n" + preview[:MAX_TEXT_CHARS] + "\n```")]
    try:
        shown = json.dumps(req.args, ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        shown = str(req.args)
    return [text("```json\n" + shown[:MAX_TEXT_CHARS] + "\n```")]


def findings(req: ApprovalRequest, always: tuple[str, ...]) -> str:
    """Why it asks, what the parse found, what "always" stores: the card's words."""
    scoped = req if isinstance(req, ScopedApprovalRequest) else None
    args = req.args if isinstance(req.args, dict) else {}
    lines: list[str] = []
    if isinstance(args.get("description"), str):
        lines.append(f"the model says: {args['description']}")
    decided_by = scoped.decided_by if scoped else ""
    why = req.reason + (f" ({decided_by})" if decided_by and decided_by not in req.reason else "")
    lines.append(f"why it asks: {why}")
    if req.tool == "bash" and scoped and scoped.commands:
        lines.append("policy's parse found: " + "; ".join(scoped.commands))
    if always:
        lines.append("allow always stores, for this session: " + "; ".join(always))
    else:
        lines.append("no \"always\" for this call: policy asks every time (a destructive "
                     "pattern, or nothing safe to store)")
    return "\n".join(lines)


def permission_content(req: ApprovalRequest,
                       always: tuple[str, ...]) -> list[TextContentBlock | FileEditToolCallContent]:
    """The question's content: what will run, then the findings."""
    preview = req.preview if isinstance(req, ScopedApprovalRequest) else ""
    return [*_what_will_run(req, preview), text(findings(req, always))]


def permission_options(always: tuple[str, ...]) -> list[PermissionOption]:
    """Allow once, allow always (when policy offers it, naming what it stores), reject."""
    options = [PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once")]
    if always:
        options.append(PermissionOption(option_id="allow_always",
                                        name="Allow always (this session): " + "; ".join(always),
                                        kind="allow_always"))
    options.append(PermissionOption(option_id="reject", name="Reject", kind="reject_once"))
    return options
