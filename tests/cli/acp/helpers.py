"""An ACP client for tests: the SDK's own client side, over real pipes to ``abhed acp``.

:func:`connect` starts ``abhed acp`` as a subprocess (the way an editor
does) and yields the SDK's ``ClientSideConnection`` and a :class:`Recorder`
that keeps every update and answers permission requests as the test says.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.core import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)

#: (tool call, options) -> the option id to choose, None to cancel, or raise to fail the request.
Answer = Callable[[ToolCallUpdate, list[PermissionOption]], str | None]


def write_config(home: Path, base_url: str, **sections: Any) -> None:
    """config.json: the scripted server as the one provider, and ``sections`` as given."""
    conf = {"custom_providers": [{"name": "local", "api": "openai", "base_url": base_url,
                                  "sampling": ["temperature", "seed"], "params": {"temperature": 0},
                                  "model": "scripted", "max_retries": 0}], **sections}
    (home / "config.json").write_text(json.dumps(conf))


class Recorder:
    """The client side: keeps updates in order, answers questions with ``answer``."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.asked: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.answer = answer or (lambda call, options: None)
        self.hold = False
        self.changed = asyncio.Event()

    async def request_permission(self, session_id: str, tool_call: ToolCallUpdate,
                                 options: list[PermissionOption], **kwargs: Any,
                                 ) -> RequestPermissionResponse:
        self.asked.append((tool_call, options))
        self.changed.set()
        if self.hold:  # an editor whose person never answers
            await asyncio.Event().wait()
        choice = self.answer(tool_call, options)
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected",
                                                                option_id=choice))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    # What an editor offers that Abhed must never use: each fails the test loudly if called.
    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("abhed acp read through the client's file system")

    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("abhed acp wrote through the client's file system")

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("abhed acp ran a command in the client's terminal")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # -- reading what came -------------------------------------------------------
    def of(self, kind: type) -> list[Any]:
        return [u for _, u in self.updates if isinstance(u, kind)]

    def message(self) -> str:
        return "".join(u.content.text for u in self.of(AgentMessageChunk)
                       if isinstance(u.content, TextContentBlock))

    def calls(self) -> dict[str, list[Any]]:
        """Each tool call id -> its start and updates, in order."""
        out: dict[str, list[Any]] = {}
        for _, u in self.updates:
            if isinstance(u, (ToolCallStart, ToolCallProgress)):
                out.setdefault(u.tool_call_id, []).append(u)
        return out

    async def until(self, what: Callable[[], Any], timeout: float = 60) -> Any:
        """Wait (on updates as they come, never a fixed sleep) until ``what()`` is truthy."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (got := what()):
            self.changed.clear()
            left = deadline - loop.time()
            if left <= 0:
                raise AssertionError(f"timed out waiting; updates so far: {self.updates[-5:]}")
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
            except TimeoutError:
                pass
        return got


@asynccontextmanager
async def connect(recorder: Recorder, *args: str, cwd: Path | None = None,
                  ) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    """``abhed acp ARGS`` as a subprocess, initialized as an editor with every capability would."""
    async with spawn_agent_process(recorder, sys.executable, "-m", "cli", "acp", *args,
                                   env=os.environ.copy(), cwd=cwd,
                                   transport_kwargs={"stderr": None}) as (conn, proc):
        init = await asyncio.wait_for(conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True),
            client_info=Implementation(name="abhed-tests", version="1")), 60)
        assert init.protocol_version == PROTOCOL_VERSION
        yield conn, proc


def prompt(text: str) -> list[TextContentBlock]:
    return [TextContentBlock(type="text", text=text)]
