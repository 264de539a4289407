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
    "/undo": "undo the newest run's file changes (again: the run before); /undo N: every run "
             "after run N; --skip/--overwrite PATH for a file it refused",
    "/redo": "put back what the last /undo undid",
    "/todo": "show the todo list and the plan",
    "/export": "write the conversation as Markdown: /export [FILE]",
    "/sandbox": "where bash runs: the sandbox backend of this session",
    "/copy": "copy the last answer to the clipboard",
    "/quit": "quit",
}

KEYS: list[tuple[str, str]] = [
    ("Enter", "send; while the agent works: steer (reaches the model before its next step); "
              "while it starts: sent once it is ready"),
    ("Tab", "while the agent works: queue the message for after the turn; else complete / or @"),
    ("Shift+Tab", "to the approval card when one waits, else to the conversation's tool cards; "
                  "again (or Tab) back to the message"),
    ("Ctrl+J", "new line in the message"),
    ("Up / Down", "on the first / last line: earlier / later prompts (kept per workspace); Up on "
                  "an empty input first takes back the last queued message"),
    ("Esc", "interrupt the running turn (the model stream and a running command); never quits"),
    ("Ctrl+C", "clear the input, or interrupt; twice on an empty, idle screen quits"),
    ("Ctrl+D", "quit"),
    ("PgUp / PgDn", "scroll the conversation a screen (also while an approval is open)"),
    ("Home / End", "with nothing typed: the top of the conversation / the newest output "
                   "(following it again)"),
    ("Ctrl+Home / Ctrl+End", "the first message / the newest output, whatever is typed"),
    ("Ctrl+O", "expand or collapse the selected tool card, else the last one"),
    ("Ctrl+Y", "copy the last answer"),
    ("Ctrl+T", "show or hide the side panel (todo and plan)"),
    ("y / a / n / r", "on the approval card: allow once / allow always / deny / deny with a "
                      "reason"),
    ("Up / Down, o", "on the conversation's cards: pick a card, expand or collapse it"),
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
