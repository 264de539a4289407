"""Modes under a site: ``abhed acp`` offers only what the site and the engineer's settings allow.

In-process (the site layer's place is a module constant, pointed at a temporary directory as
tests/appliance/compose/test_site.py does), over real pipes, with the SDK's own client.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent
from acp.schema import (
    ClientCapabilities,
    CurrentModeUpdate,
    ToolCallStart,
)

from appliance.assembly import _site_layer as site_module
from appliance.compose import load_config, open_store
from cli.acp._agent import CARRY_OUT, AbhedAgent
from cli.acp._serve import run
from models.scripted import ScriptedServer
from tests.appliance.compose.site_files import write_site
from tests.cli.acp.helpers import Recorder, prompt, write_config


async def _pipes_to(agent: AbhedAgent) -> tuple[asyncio.StreamReader, asyncio.StreamWriter,
                                                threading.Thread]:
    """Serve ``agent`` on a thread over two real pipes; the client's ends, and the thread."""
    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    server = threading.Thread(target=lambda: asyncio.run(run(agent, to_agent_r, from_agent_w,
                                                             signals=False)), daemon=True)
    server.start()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(from_agent_r, "rb", buffering=0))
    from asyncio.streams import FlowControlMixin

    transport, protocol = await loop.connect_write_pipe(FlowControlMixin,
                                                        os.fdopen(to_agent_w, "wb", buffering=0))
    return reader, asyncio.StreamWriter(transport, protocol, None, loop), server


def test_a_site_that_forbids_auto_is_never_offered_auto(tmp_path: Path, abhed_home: Path,
                                                        workspace: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    etc = tmp_path / "etc-abhed"
    etc.mkdir(mode=0o755)
    monkeypatch.setattr(site_module, "HOST_SITE", etc / "site")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("PATH", os.environ["PATH"])
    with ScriptedServer() as server:
        write_config(abhed_home, server.base_url)
        release = write_site(tmp_path / "opt" / "site", {
            "policy": {"mode": "ask"},
            "custom_providers": [{"name": "local", "api": "openai", "base_url": server.base_url,
                                  "sampling": ["temperature", "seed"], "params": {"temperature": 0},
                                  "model": "scripted", "max_retries": 0}]})
        (etc / "site").symlink_to(release)
        (abhed_home / "config.json").unlink()
        config = load_config()
        store = open_store(config, for_work=True)
        agent = AbhedAgent(config, store)
        server.add({"tool_calls": [{"name": "plan", "arguments": {
                       "title": "rename", "steps": [{"step": "edit a", "status": "pending"}]}}]},
                   {"text": "Here is the plan."}, {"text": "Carried out."})
        rec = Recorder(lambda call, options: "ask" if call.kind == "switch_mode" else None)

        async def go() -> None:
            reader, writer, thread = await _pipes_to(agent)
            conn = connect_to_agent(rec, writer, reader)
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            assert new.modes is not None and new.modes.current_mode_id == "ask"
            assert [m.id for m in new.modes.available_modes] == ["plan", "ask"]
            with pytest.raises(RequestError) as refused:
                await conn.set_session_mode(session_id=new.session_id, mode_id="auto")
            assert refused.value.code == -32602
            assert "looser" in str(refused.value) and "policy.mode" in str(refused.value)
            await conn.set_session_mode(session_id=new.session_id, mode_id="plan")
            done = await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                                      prompt=prompt("plan a rename")), 60)
            assert done.stop_reason == "end_turn"
            writer.close()
            await asyncio.to_thread(thread.join, 60)
            assert not thread.is_alive()

        asyncio.run(go())
        store.close()
    # the plan was shown as the agent's message, its approval asked; "ask" was chosen (never
    # auto: the site forbids it, so it was not offered), and the plan was carried out
    assert "**Plan: rename**" in rec.message() and rec.message().endswith("Carried out.")
    question, options = [q for q in rec.asked if q[0].kind == "switch_mode"][0]
    assert [o.option_id for o in options] == ["ask", "keep_planning"]
    assert [u.current_mode_id for u in rec.of(CurrentModeUpdate)] == ["ask"]
    assert any(isinstance(u, ToolCallStart) and u.title.startswith("plan") for _, u in rec.updates)
    prompts = [m for r in server.requests for m in r["messages"] if m["role"] == "user"]
    assert prompts[-1]["content"] == CARRY_OUT
