"""An agent on a scripted server whose store and session outlive it, to test resuming."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from appliance.events import EventStore, StoredEvent
from appliance.loop import Agent, Limits
from models.scripted import ScriptedServer, ScriptStep
from tests.appliance.helpers import scripted_agent


@contextmanager
def agent_on(store: EventStore, workspace: Path, steps: list[dict[str, Any] | ScriptStep], *,
             session_id: str | None = None, limits: Limits | None = None, **sections: Any,
             ) -> Iterator[tuple[Agent, ScriptedServer, list[StoredEvent]]]:
    """A fresh process's agent: a new session, or ``session_id`` reopened from ``store``."""
    with scripted_agent(workspace, steps, store=store, session_id=session_id, limits=limits,
                        params={"temperature": 0}, **sections) as out:
        yield out


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}
