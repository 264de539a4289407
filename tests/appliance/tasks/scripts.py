"""Scripted parents and children for the subagent tests (tasks and their shells)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from models.scripted import ScriptStep


def is_child(body: dict[str, Any]) -> bool:
    return "You are a subagent" in body["messages"][0]["content"]


def task_call(prompt: str, description: str = "look around", agent_type: str = "explore",
          **extra: Any) -> dict[str, Any]:
    return {"name": "task", "arguments": {"prompt": prompt, "description": description,
                                          "agent_type": agent_type, **extra}}


def step(*calls: dict[str, Any], text: str = "") -> ScriptStep:
    return ScriptStep(text=text, tool_calls=calls)  # type: ignore[arg-type]


def last_tool(body: dict[str, Any]) -> str:
    msgs = body["messages"]
    return msgs[-1]["content"] if msgs[-1]["role"] == "tool" else ""


class Script:
    """A responder: the parent's replies in order; each child's from a function of its request."""

    def __init__(self, parent: list[ScriptStep], child: Callable[[dict[str, Any]], ScriptStep]) -> None:
        self.parent = list(parent)
        self.child = child
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ScriptStep:
        with self.lock:
            self.bodies.append(body)
            if not is_child(body):
                return self.parent.pop(0) if self.parent else ScriptStep(text="done")
        return self.child(body)
