"""Shared set-up for the loop tests: a real session and store, a scripted server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from appliance import Dispatcher
from appliance.events import EventStore, StoredEvent
from appliance.loop import Agent, Approver, Limits, ObservedSession, build_system_prompt
from models import ProviderConfig, ScriptedServer, ScriptStep, open_provider
from tools import ToolContext, Workspace, native_tools


@contextmanager
def scripted_agent(workspace: Path, steps: list[dict[str, Any] | ScriptStep], *,
                   limits: Limits | None = None, approver: Approver | None = None, mode: str = "auto",
                   params: dict[str, Any] | None = None) -> Iterator[tuple[Agent, ScriptedServer, list[StoredEvent]]]:
    store = EventStore(workspace.parent / "events.db")
    with ScriptedServer(steps) as server:
        pconf = ProviderConfig(name="scripted", api="openai", base_url=server.base_url,
                               sampling=["temperature", "seed"], params=params or {"temperature": 0},
                               model="scripted", max_retries=0)
        provider = open_provider(pconf)
        tools = native_tools()
        ws = Workspace(str(workspace))
        session = ObservedSession.create(store, ws.root, version="test")
        assert isinstance(session, ObservedSession)
        seen: list[StoredEvent] = []
        session.listen(seen.append)
        ctx = ToolContext(workspace=ws, ledger=session)
        agent = Agent(session=session, dispatcher=Dispatcher(session, tools, ctx), provider=provider,
                      system_prompt=build_system_prompt(ws.root, tools), tools=tools,
                      limits=limits, approver=approver, mode=mode)
        try:
            yield agent, server, seen
        finally:
            provider.close()
            store.close()


def types(events: list[StoredEvent]) -> list[str]:
    return [e.event.type for e in events]
