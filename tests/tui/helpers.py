"""Shared set-up for the TUI tests: a real app on a scripted server, a fake link for snapshots."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from appliance import events_db_path
from appliance.compose import load_config
from appliance.events import (
    ActionEvent,
    EventStore,
    ModelTurn,
    ObservationEvent,
    RunEnded,
    RunStarted,
    StoredEvent,
    UserMessage,
)
from models import Delta
from tools import ToolResult
from tui import AbhedApp
from tui._approval import ApprovalCard
from tui._link import LinkInfo, PendingApproval


def kind_of(entry: Any) -> str:
    """user, assistant, tool or notice: what an entry of the transcript is."""
    from tui._entries import AssistantEntry, ToolEntry, UserEntry

    for cls, name in ((UserEntry, "user"), (AssistantEntry, "assistant"), (ToolEntry, "tool")):
        if isinstance(entry, cls):
            return name
    return "notice"


def notes(app: AbhedApp) -> list[str]:
    return [e.text() for e in app.transcript.entries if kind_of(e) == "notice"]


def write_config(home: Path, base_url: str, **extra: Any) -> None:
    conf: dict[str, Any] = {
        "custom_providers": [{"name": "local", "api": "openai", "base_url": base_url,
                              "sampling": ["temperature", "seed"], "params": {"temperature": 0},
                              "model": "scripted", "max_retries": 0}],
        "sandbox": {"backend": "host"}, "policy": {"mode": "auto"}}
    conf.update(extra)
    (home / "config.json").write_text(json.dumps(conf))


def real_app(workspace: Path, **kw: Any) -> AbhedApp:
    """The app as `abhed tui` builds it: real config, store and agent link."""
    events_db_path().parent.mkdir(parents=True, exist_ok=True)
    store = EventStore(events_db_path())
    kw.setdefault("guard_s", 0.0)
    return AbhedApp(load_config(), store, workspace, **kw)


async def until(pilot: Pilot[Any], cond: Callable[[], Any], timeout_s: float = 30.0,
                what: str = "condition") -> Any:
    """Let the app run until ``cond()`` is truthy; fail with ``what`` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await pilot.pause(0.02)


async def send(pilot: Pilot[Any], app: AbhedApp, prompt: str) -> None:
    """Once the agent has started, type ``prompt`` into the composer and press enter."""
    await until(pilot, lambda: app.info is not None, what="the agent to start")
    app.composer.text = prompt
    await pilot.press("enter")


async def asked(pilot: Pilot[Any], app: AbhedApp, prompt: str) -> ApprovalCard:
    """Send ``prompt`` and wait for the approval card its first tool call brings up."""
    await send(pilot, app, prompt)
    card: ApprovalCard = await until(pilot, lambda: app.card, what="the approval card")
    return card


INFO = LinkInfo(session_id="s-20260101-000000-abcdef", workspace="/work/demo", provider="local",
                model="tiny-coder", mode="ask", sandbox="microvm", context_window=8192,
                tools=("bash", "edit", "glob", "grep", "read", "write"))


class FakeLink:
    """A link that never starts an agent: snapshot tests feed the app's sink by hand."""

    def __init__(self, config: Any, store: Any, workspace: Path, sink: Any, **kw: Any) -> None:
        self.sink = sink
        self._config: Any = None
        self._store: Any = None
        self._own_store = False
        self.agent: object | None = object()
        self.info = INFO
        self.session_id = INFO.session_id
        self.busy = False
        self.sent: list[str] = []
        self.steered: list[str] = []
        self.interrupted = 0

    def start(self) -> None:
        pass

    def history(self) -> list[StoredEvent]:
        return []

    def sessions(self, *, every_workspace: bool = False) -> list[dict[str, Any]] | None:
        return []

    def complete_paths(self, prefix: str, limit: int = 20) -> list[str]:
        return [p for p in ("src/app.py", "src/util.py", "README.md") if p.startswith(prefix)]

    def submit(self, text: str) -> bool:
        self.sent.append(text)
        self.busy = True
        return True

    def steer(self, text: str) -> bool:
        self.steered.append(text)
        return self.busy

    def interrupt(self, reason: str = "Esc") -> bool:
        self.interrupted += 1
        return self.busy

    def late_steers(self) -> list[str]:
        return []

    def undo(self, after_run: int | None = None, **kw: Any) -> str:
        return "nothing undone: a fake link"

    def close(self, wait_s: float = 10.0) -> None:
        pass


def fake_app(**kw: Any) -> AbhedApp:
    """An app on a FakeLink (no threads, no server): deterministic for snapshots."""
    kw.setdefault("guard_s", 0.0)
    config = kw.pop("config", object())
    kw.setdefault("link_factory", FakeLink)
    return AbhedApp(config, None, Path("/work/demo"), **kw)


_seq = [0]
SID = INFO.session_id


def stored(event: Any) -> StoredEvent:
    _seq[0] += 1
    return StoredEvent(_seq[0], _seq[0], "0" * 64, event)


def feed_turn(app: AbhedApp, prompt: str, *, tool: str | None = None, args: Any = None,
              output: str = "", ok: bool = True, answer: str | None = None,
              ts: str = "2026-01-01T00:00:00.000000Z", details: dict[str, Any] | None = None,
              code: str = "failed", ms: float = 12.0, wait_ms: float = 0.0) -> None:
    """Feed one recorded exchange (prompt, maybe a call and its result, maybe an answer).

    ``details`` are the result's (a bash call's ``exit_code``, an edit's ``diff``);
    ``code`` the error code of a result that is not ok.
    """
    sink = app.sink
    sink.event(stored(RunStarted(session_id=SID, ts=ts, run_id="r-1", provider="local",
                                 model="tiny-coder", mode="ask", system_prompt_sha256="0")))
    sink.event(stored(UserMessage(session_id=SID, ts=ts, run_id="r-1", text=prompt)))
    if tool is not None:
        sink.event(stored(ModelTurn(session_id=SID, ts=ts, run_id="r-1", turn=1, text="",
                                    duration_ms=1.0)))
        sink.event(stored(ActionEvent(session_id=SID, ts=ts, call_id="r-1.1.0", tool=tool,
                                      args=args)))
        result = ToolResult(ok=ok, content=output, details=details or {}, error=None if ok else
                            {"code": code, "message": output})  # type: ignore[arg-type]
        sink.event(stored(ObservationEvent(session_id=SID, ts=ts, call_id="r-1.1.0", tool=tool,
                                           result=result, duration_ms=ms,
                                           approval_wait_ms=wait_ms)))
    if answer is not None:
        sink.event(stored(ModelTurn(session_id=SID, ts=ts, run_id="r-1", turn=2, text=answer,
                                    duration_ms=1.0)))
        sink.event(stored(RunEnded(session_id=SID, ts=ts, run_id="r-1", reason="done",
                                   message="the model finished", turns=2, answer=answer)))


def start_call(app: AbhedApp, prompt: str, call_id: str, tool: str, args: dict[str, Any]) -> None:
    """A run under way with one call running: ``prompt`` fed, the app running, the call's
    action recorded and no result for it yet."""
    feed_turn(app, prompt)
    app.running = True
    app.sink.event(stored(ActionEvent(session_id=SID, call_id=call_id, tool=tool, args=args)))


def stream(app: AbhedApp, text: str) -> None:
    app.sink.delta(Delta(kind="text", text=text))


def pending(tool: str, args: Any, reason: str, *, commands: tuple[str, ...] = (),
            always: tuple[str, ...] = ()) -> PendingApproval:
    return PendingApproval("r-1.1.0", tool, args, reason, commands, always)
