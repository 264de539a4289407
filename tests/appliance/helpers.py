"""Shared set-up for the appliance tests: a scripted loop, the `abhed` CLI as a
subprocess, and an `abhed rpc` client that keeps every line it reads."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from appliance import Dispatcher
from appliance.events import EventStore, StoredEvent
from appliance.loop import Agent, Limits, ObservedSession, build_system_prompt
from appliance.policy import Approver, Gate, Mode, PolicyEngine, PolicySettings
from models import ProviderConfig, ScriptedServer, ScriptStep, open_provider
from tools import ToolContext, Workspace, native_tools


@contextmanager
def scripted_agent(workspace: Path, steps: list[dict[str, Any] | ScriptStep], *,
                   limits: Limits | None = None, approver: Approver | None = None, mode: Mode = "auto",
                   params: dict[str, Any] | None = None) -> Iterator[tuple[Agent, ScriptedServer, list[StoredEvent]]]:
    """A real agent on the real dispatch path: the gate runs ``mode`` with no rules."""
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
        gate = Gate(PolicyEngine(PolicySettings(mode=mode)), approver=approver, chosen_by="caller")
        agent = Agent(session=session, dispatcher=Dispatcher(session, tools, ctx, gate),
                      provider=provider, system_prompt=build_system_prompt(ws.root, tools),
                      tools=tools, limits=limits)
        try:
            yield agent, server, seen
        finally:
            provider.close()
            store.close()


def types(events: list[StoredEvent]) -> list[str]:
    return [e.event.type for e in events]


def write_config(home: Path, base_url: str, **provider: Any) -> None:
    """A config.json whose one provider is the scripted server at ``base_url``."""
    conf = {"custom_providers": [{"name": "local", "api": "openai", "base_url": base_url,
                                  "sampling": ["temperature", "seed"], "params": {"temperature": 0},
                                  "model": "scripted", "max_retries": 0, **provider}]}
    (home / "config.json").write_text(json.dumps(conf))


def abhed(*args: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run ``abhed ARGS`` as a real subprocess (the door an operator uses)."""
    return subprocess.run([sys.executable, "-m", "appliance.cli", *args], check=False, capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy(), **kw)


class RpcClient:
    """Runs ``abhed rpc`` as a subprocess; a thread reads its lines into a buffer.

    ``until`` takes the first buffered line that matches and leaves every other
    line in place, so waiting for one message never throws away another that
    arrived first (a ``run_ended`` racing an ``abort`` reply, say).
    """

    def __init__(self, *args: str) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "appliance.cli", "rpc", *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=os.environ.copy())
        self._incoming: queue.Queue[dict[str, Any]] = queue.Queue()
        self.buffer: list[dict[str, Any]] = []
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        try:
            for line in self.p.stdout:
                self._incoming.put(json.loads(line))
        except ValueError:  # closed by close()
            pass

    def raw(self, data: bytes) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, **req: Any) -> None:
        self.raw(json.dumps(req).encode() + b"\n")

    def until(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 90) -> dict[str, Any]:
        for i, msg in enumerate(self.buffer):
            if pred(msg):
                return self.buffer.pop(i)
        while True:
            msg = self._incoming.get(timeout=timeout)
            self.seen.append(msg)
            if pred(msg):
                return msg
            self.buffer.append(msg)

    def event(self, kind: str) -> dict[str, Any]:
        return self.until(lambda m: m["type"] == "event" and m["event"]["type"] == kind)["event"]

    def close(self) -> int:
        assert self.p.stdin is not None and self.p.stderr is not None
        self.p.stdin.close()
        code = self.p.wait(30)
        self.stderr = self.p.stderr.read().decode("utf-8", "replace")
        self.p.stderr.close()
        if self.p.stdout is not None:
            self.p.stdout.close()
        return code
