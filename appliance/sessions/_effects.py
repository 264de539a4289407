"""What a session's events show it did: the files it changed and the commands it ran.

Measured from the log, never from what an agent said: the ``task`` tool's
result and a crashed ``task`` call's reconciliation both read a subagent's
effects here, so they say the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from appliance.events import ActionEvent, EventStore, ModelTurn, ObservationEvent

__all__ = ["Effects", "effects_of"]


@dataclass
class Effects:
    """Files a session changed with write/edit, its bash commands, its model turns and tokens."""

    files: list[str] = field(default_factory=list)
    #: {"command", "exit_code", "signal", "ok", "ran", "error"}: ``ran`` is false for one refused
    #: before it ran (policy, an interactive command); ``error`` is its error code.
    commands: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    tokens: int = 0

    def lines(self) -> list[str]:
        """What it did, as the model reads it: files, commands that ran, commands refused."""
        ran = [c for c in self.commands if c.get("ran", True)]
        cut = [c for c in self.commands if c.get("error") == "outcome_unknown"]
        refused = [c for c in self.commands if not c.get("ran", True) and c not in cut]
        out = ["Files it changed: " + (", ".join(self.files) if self.files else "none")
               + (" (bash commands may have changed more)" if ran or cut else "") + "."]
        if ran:
            out.append(f"Commands it ran: {_listed(ran, _ended)}.")
        if cut:
            out.append(f"Commands cut off when Abhed stopped (they may have run, partly): "
                       f"{_listed(cut, lambda c: 'outcome unknown')}.")
        if refused:
            out.append(f"Commands refused or not run: {_listed(refused, lambda c: str(c['error']))}.")
        return out


def _ended(command: dict[str, Any]) -> str:
    if command.get("exit_code") is not None:
        return f"exit {command['exit_code']}"
    if command.get("signal") is not None:
        return f"killed (signal {command['signal']})"
    return "started in the background" if command.get("ok") else str(command.get("error"))


def _listed(commands: list[dict[str, Any]], outcome: Callable[[dict[str, Any]], str]) -> str:
    shown = "; ".join(f"`{c['command'][:120]}` -> {outcome(c)}" for c in commands[:20])
    return shown + (f" and {len(commands) - 20} more" if len(commands) > 20 else "")


def effects_of(store: EventStore, session_id: str) -> Effects:
    """What ``session_id``'s own events show it did."""
    out = Effects()
    actions: dict[str, Any] = {}
    for stored in store.events(session_id, types=("action", "observation", "model_turn")):
        e = stored.event
        if isinstance(e, ModelTurn):
            out.turns += 1
            if e.usage is not None:
                out.tokens += e.usage.prompt_tokens + e.usage.completion_tokens
        elif isinstance(e, ActionEvent):
            actions[e.call_id] = e.args
        elif isinstance(e, ObservationEvent):
            d = e.result.details
            if e.tool in ("write", "edit") and e.result.ok and d.get("changed"):
                path = str(d.get("path"))
                if path not in out.files:
                    out.files.append(path)
            elif e.tool == "bash":
                args = actions.get(e.call_id)
                command = args.get("command") if isinstance(args, dict) else None
                if command is not None:
                    # It ran when the sandbox reported how it ended (or started it in the
                    # background); otherwise it was refused before running (policy, checks).
                    ran = e.result.ok or "exit_code" in d or "signal" in d
                    out.commands.append({
                        "command": str(command)[:500], "exit_code": d.get("exit_code"),
                        "signal": d.get("signal"), "ok": e.result.ok, "ran": ran,
                        "error": e.result.error.code if e.result.error else None})
    return out
