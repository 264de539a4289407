"""The TUI against the real vLLM CPU server (tiny model) through a tool call to the end of the turn.

The tiny model's random weights write schema-valid arguments under a named
tool choice (tests/models/tiny_model.py), so the test names the tool for the
first turn, as `abhed run --force-tool` does; everything else is the real
path: the model streams, the glob tool runs, the card and the answer render.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tui.helpers import kind_of, notes, real_app, until
from tests.vllm_server import SERVED, shared_vllm
from tui._entries import ToolEntry

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


async def test_tui_runs_a_real_tool_call_against_vllm(abhed_home: Path, workspace: Path) -> None:
    server = shared_vllm()
    provider = {"name": "local-vllm", "api": "openai", "base_url": server.base_url, "model": SERVED,
                "sampling": ["temperature", "seed", "max_tokens"],
                "params": {"temperature": 0, "max_tokens": 64}}
    (abhed_home / "config.json").write_text(json.dumps({
        "custom_providers": [provider], "loop": {"max_turns": 4},
        "sandbox": {"backend": "host"}, "policy": {"mode": "auto"}}))
    (workspace / "a.py").write_text("print('hi')\n")
    app = real_app(workspace)
    async with app.run_test(size=(100, 32)) as pilot:
        await until(pilot, lambda: app.info is not None or app.state == "not started", 120,
                    what="the agent to start against vLLM")
        assert app.info is not None and app.info.model == SERVED, app.transcript.entries[-1].text()
        assert app.link is not None and app.link.agent is not None
        app.link.agent.first_tool_choice = {"type": "function", "function": {"name": "glob"}}
        app.composer.text = "list the files"
        await pilot.press("enter")
        await until(pilot, lambda: not app.running and app.state == "idle", 300,
                    what="the turn to end")
        cards = [e for e in app.transcript.entries if isinstance(e, ToolEntry)]
        assert cards and cards[0].tool == "glob" and cards[0].status in ("ok", "failed")
        assert all(kind_of(e) != "tool" or isinstance(e, ToolEntry) for e in app.transcript.entries)
        said = notes(app)
        assert not any("turns," in n for n in said), said  # it ended "done": no end notice
        assert app.view.tokens > 0
