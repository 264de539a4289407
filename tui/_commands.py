"""Slash commands and the key table: one list each, shown by ``/help`` and docs/tui.md.

docs/tui.md's key table is checked against :data:`KEYS` by a test, so the
two cannot drift apart.
"""

from __future__ import annotations

__all__ = ["COMMANDS", "KEYS", "complete_command", "help_text"]

COMMANDS: dict[str, str] = {
    "/help": "keys and commands",
    "/mode": "show or set the mode: /mode plan|ask|auto (the operator's policy still binds)",
    "/resume": "pick an earlier session to continue",
    "/new": "start a new session in this workspace",
    "/compact": "compact the conversation now (between runs)",
    "/undo": "undo the last run's file changes",
    "/todo": "show the todo list and the plan",
    "/export": "write the conversation as Markdown: /export [FILE]",
    "/sandbox": "where bash runs: the sandbox backend of this session",
    "/copy": "copy the last answer to the clipboard",
    "/quit": "quit",
}

KEYS: list[tuple[str, str]] = [
    ("Enter", "send; while the agent works: steer (reaches the model before its next step)"),
    ("Tab", "while the agent works: queue the message for after the turn; else complete / or @"),
    ("Ctrl+J", "new line in the message"),
    ("Up", "on an empty input: take the last queued message back to edit it"),
    ("Esc", "interrupt the running turn (the model stream and a running command); never quits"),
    ("Ctrl+C", "clear the input, or interrupt; twice on an empty, idle screen quits"),
    ("Ctrl+D", "quit"),
    ("PgUp / PgDn", "scroll the conversation (also while an approval is open)"),
    ("Home / End", "earliest shown / latest message"),
    ("Ctrl+O", "expand or collapse the last tool card (Enter on a focused card)"),
    ("Ctrl+Y", "copy the last answer"),
    ("Ctrl+T", "show or hide the side panel (todo and plan)"),
    ("y / a / n / r", "approval: allow once / allow always / deny / deny with a reason"),
]

UNAVAILABLE: dict[str, str] = {}


def complete_command(text: str) -> list[str]:
    """Commands starting with ``text`` (which starts with /)."""
    word = text.split(" ", 1)[0]
    return [c for c in COMMANDS if c.startswith(word)] if " " not in text else []


def help_text() -> str:
    width = max(len(k) for k, _ in KEYS)
    lines = ["Keys:"] + [f"  {k:<{width}}  {v}" for k, v in KEYS]
    lines += ["", "Commands:"] + [f"  {c:<9} {h}" for c, h in COMMANDS.items()]
    return "\n".join(lines)
