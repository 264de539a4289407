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

from appliance import Session
from appliance.compose import Config, Tooling, choose_mode, open_tooling, start_agent
from appliance.events import EventStore, StoredEvent
from appliance.loop import Agent, Limits
from appliance.policy import Approver, Mode
from models import ProviderConfig
from models.scripted import ScriptedServer, ScriptStep
from tools import Workspace


def scripted_config(base_url: str, *, limits: Limits | None = None,
                    params: dict[str, Any] | None = None, provider: dict[str, Any] | None = None,
                    **sections: Any) -> Config:
    """A config whose one provider is the scripted server at ``base_url``; ``provider``: more
    of its fields (``catalog_entry``); ``sections``: more of config.json's (``tasks``,
    ``extensions``, ``policy``...), as models or dicts."""
    pconf = ProviderConfig.model_validate({
        "name": "scripted", "api": "openai", "base_url": base_url,
        "sampling": ["temperature", "seed"], "params": params or {"temperature": 0},
        "model": "scripted", "max_retries": 0, **(provider or {})})
    return Config.model_validate({"custom_providers": [pconf], "loop": limits or Limits(),
                                  **sections})


def tooling(store: EventStore, workspace: Path, *, approver: Approver | None = None,
            mode: Mode | None = None, session: Session | None = None, run_id: str = "",
            **sections: Any) -> Tooling:
    """Tools, policy and dispatcher as ``abhed tool`` gets them (``open_tooling``), no sandbox.

    ``sections`` are config.json's (``policy``, ``extensions``, ``tools``...);
    ``mode`` is a caller's request bounded by ``policy.mode``; ``session``:
    reopen one (default: a new session in ``store``).
    """
    config = Config.model_validate(sections)
    ws = Workspace(str(workspace), config.tools.secret_paths)
    if session is None:
        session = Session.create(store, ws.root, version="test")
    return open_tooling(config, session, ws, mode=choose_mode(config, mode, door="test"),
                        approver=approver, run_id=run_id, sandbox=False)


@contextmanager
def scripted_agent(workspace: Path, steps: list[dict[str, Any] | ScriptStep], *,
                   limits: Limits | None = None, approver: Approver | None = None, mode: Mode = "auto",
                   params: dict[str, Any] | None = None, store: EventStore | None = None,
                   session_id: str | None = None, shell: bool = False,
                   provider: dict[str, Any] | None = None, **sections: Any,
                   ) -> Iterator[tuple[Agent, ScriptedServer, list[StoredEvent]]]:
    """A real agent built by the real composition (``start_agent``), on a scripted server.

    The gate runs ``mode`` with no rules; ``store`` (default: a new one beside
    the workspace) outlives the agent, so a test can resume ``session_id`` in
    a "new process".  ``shell`` False leaves bash refusing (no sandbox is opened); True
    opens the one config's ``sandbox`` section names (e.g. ``sandbox={"backend": "host"}``).
    """
    own = store is None
    log = store if store is not None else EventStore(workspace.parent / "events.db")
    with ScriptedServer(steps) as server:
        config = scripted_config(server.base_url, limits=limits, params=params, provider=provider,
                                 **sections)
        started = start_agent(config,
                              log, workspace, door="test", mode=mode, approver=approver,
                              session_id=session_id, sandbox=shell)
        agent = started.agent
        seen: list[StoredEvent] = []
        open_ = [True]  # ``seen`` is what happened in the test's block, not the close after it
        agent.session.listen(lambda stored: seen.append(stored) if open_[0] else None)
        try:
            yield agent, server, seen
        finally:
            open_[0] = False
            agent.close()
            if own:
                log.close()


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
    return subprocess.run([sys.executable, "-m", "cli", *args], check=False, capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy(), **kw)


class RpcClient:
    """Runs ``abhed rpc`` as a subprocess; a thread reads its lines into a buffer.

    ``until`` takes the first buffered line that matches and leaves every other
    line in place, so waiting for one message never throws away another that
    arrived first (a ``run_ended`` racing an ``abort`` reply, say).
    """

    def __init__(self, *args: str) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "cli", "rpc", *args],
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
