"""``abhed acp`` streams a whole turn from the real vLLM (CPU build, the tiny model).

The tiny model's random weights write schema-valid arguments under a named tool
choice (tests/models/tiny_model.py), so ``--force-tool glob`` makes a real tool
call that runs and is shown as an ACP tool call; then the model stops.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from acp.schema import ToolCallProgress, ToolCallStart

from tests.cli.acp.helpers import Recorder, connect, prompt
from tests.vllm_server import SERVED, shared_vllm

pytestmark = pytest.mark.slow


def test_a_turn_streams_from_real_vllm_with_a_forced_tool_call(abhed_home: Path,
                                                               workspace: Path) -> None:
    server = shared_vllm()
    (abhed_home / "config.json").write_text(json.dumps({
        "custom_providers": [{"name": "local-vllm", "api": "openai", "base_url": server.base_url,
                              "model": SERVED, "sampling": ["temperature", "seed", "max_tokens"],
                              "params": {"temperature": 0, "max_tokens": 64}}],
        "loop": {"max_turns": 4}, "policy": {"mode": "auto"}}))
    (workspace / "a.txt").write_text("alpha\n")
    rec = Recorder()

    async def go() -> str:
        async with connect(rec, "--force-tool", "glob") as (conn, _):
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            done = await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                                      prompt=prompt("list the files")), 300)
            return done.stop_reason

    assert asyncio.run(go()) in ("end_turn", "max_turn_requests")
    starts = rec.of(ToolCallStart)
    assert starts and starts[0].title.startswith("glob") and starts[0].kind == "search"
    ends = [u for u in rec.of(ToolCallProgress) if u.tool_call_id == starts[0].tool_call_id]
    assert ends[-1].status in ("completed", "failed") and ends[-1].content
