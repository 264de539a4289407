"""Subagent profiles: the tools each ``agent_type`` gets, chosen in code, not by a prompt.

explore and review cannot change anything: they get read, glob and grep
only (no bash, so no shell that could write), and their policy holds only
the ``fs:read`` capability, so even a tool that slipped into the list would
be refused at dispatch.  test adds bash.  general gets every tool the parent
has but ``task``: nested spawning is off.
"""

from __future__ import annotations

from tools import Tool

__all__ = ["PROFILE_PROMPTS", "child_tools"]

_READ_ONLY = ("glob", "grep", "read")
_TOOLSETS: dict[str, tuple[str, ...] | None] = {
    "explore": _READ_ONLY,
    "review": _READ_ONLY,
    "test": (*_READ_ONLY, "bash"),
    "general": None,  # everything the parent has, but task
}

PROFILE_PROMPTS = {
    "explore": "You are a subagent exploring the workspace read-only for another agent. You cannot "
               "change anything. Find what the task asks and answer with a concise summary: paths, "
               "line numbers, names, and what you did not find.",
    "review": "You are a subagent reviewing code read-only for another agent. You cannot change "
              "anything. Answer with the problems you found (file:line, why, how to fix) and what "
              "looks right.",
    "test": "You are a subagent that runs tests for another agent. Use bash to run them; change "
            "files only if the task says so. Answer with the commands you ran, their exit codes "
            "and the failures, quoted briefly.",
    "general": "You are a subagent doing one self-contained task for another agent. Do it, then "
               "answer with a concise summary of what you changed and anything left undone.",
}


def child_tools(agent_type: str, parent: dict[str, Tool]) -> dict[str, Tool]:
    """The tools a child of this type is offered: a subset of its parent's, never more."""
    names = _TOOLSETS[agent_type]
    if names is None:
        return {n: t for n, t in parent.items() if n != "task"}
    return {n: parent[n] for n in names if n in parent}
