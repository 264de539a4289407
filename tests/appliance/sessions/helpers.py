"""An agent on a scripted server whose store and session outlive it, to test resuming."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from appliance import Dispatcher
from appliance.events import EventStore, StoredEvent
from appliance.loop import Agent, Limits, ObservedSession, build_system_prompt
from appliance.policy import Gate
from appliance.sessions import ArtifactStore
from models import ProviderConfig, ScriptedServer, ScriptStep, open_provider
from tools import ToolContext, Workspace, native_tools


@contextmanager
def agent_on(store: EventStore, workspace: Path, steps: list[dict[str, Any] | ScriptStep], *,
             session_id: str | None = None, limits: Limits | None = None,
             ) -> Iterator[tuple[Agent, ScriptedServer, list[StoredEvent]]]:
    """A fresh process's agent: a new session, or ``session_id`` reopened from ``store``."""
    with ScriptedServer(steps) as server:
        pconf = ProviderConfig(name="scripted", api="openai", base_url=server.base_url,
                               sampling=["temperature"], params={"temperature": 0},
                               model="scripted", max_retries=0)
        provider = open_provider(pconf)
        tools = native_tools()
        ws = Workspace(str(workspace))
        if session_id is None:
            session = ObservedSession.create(store, ws.root, version="test")
        else:
            session = ObservedSession.open(store, session_id, ws.root)
        assert isinstance(session, ObservedSession)
        seen: list[StoredEvent] = []
        session.listen(seen.append)
        ctx = ToolContext(workspace=ws, ledger=session,
                          artifacts=ArtifactStore.beside(store.path, session.id))
        agent = Agent(session=session, dispatcher=Dispatcher(session, tools, ctx, Gate.permissive()),
                      provider=provider,
                      system_prompt=build_system_prompt(ws.root, tools), tools=tools, limits=limits)
        try:
            yield agent, server, seen
        finally:
            provider.close()


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}
