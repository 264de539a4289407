"""The newcomer's path, pinned: after `scripts/demo`, a bare `abhed` works on the same model.

1. The demo's configuration (a provider marked ``start_on_demand``, nothing else
   set by hand): the first door (``abhed run``) starts the real vLLM (CPU build,
   the suite's tiny model) on this user's socket, says so with its log, and the
   model answers a forced ``read``; the service stops by itself once unused.
2. The scripted model drives an ``edit`` and a ``bash`` call through the same
   door, with the shell in the microVM (the suite's test image, as
   tests/appliance/sandbox builds it): the edit lands in the workspace and the
   command's result says it ran in the microVM.

The cold timings measured here are in docs/performance.md ("The newcomer's path").
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from appliance.compose import load_config, local_service
from models.scripted import ScriptedServer, ScriptStep
from tests.appliance.helpers import abhed
from tests.helpers import wait_for
from tests.vllm_server import SERVED, VLLM_ENV, entry_for, tiny_model, vllm_python

pytestmark = pytest.mark.slow


def _events(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line)["event"] for line in stdout.splitlines() if line.startswith("{")]


def test_the_demo_configuration_starts_the_model_on_demand_and_it_answers_a_forced_read(
        abhed_home: Path, workspace: Path) -> None:
    python = vllm_python()
    entry = entry_for(tiny_model(python))
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [entry.model_dump(mode="json")]}))
    (abhed_home / "config.json").write_text(json.dumps({
        "serve": {"vllm_python": python, "env": VLLM_ENV, "idle_stop_s": 2, "startup_timeout_s": 900},
        "custom_providers": [{"name": "local", "api": "openai", "base_url": "http://localhost/v1",
                              "start_on_demand": True, "model": SERVED, "catalog_entry": "tiny",
                              "sampling": ["temperature", "max_tokens"],
                              "params": {"temperature": 0, "max_tokens": 64}}],
        "sandbox": {"backend": "bwrap"}, "loop": {"max_turns": 2}}))
    (workspace / "notes.txt").write_text("code name: Abhed\n")
    t0 = time.monotonic()
    proc = abhed("run", f"What does `{workspace}/notes.txt` say?", "--workspace", str(workspace),
                 "--force-tool", "read", "--json", timeout=900)
    cold_s = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "starting the local model service for tiny" in proc.stderr
    assert str(abhed_home / "logs" / "vllm-tiny.log") in proc.stderr
    events = _events(proc.stdout)
    turn = next(e for e in events if e["type"] == "model_turn")
    assert turn["tool_calls"][0]["name"] == "read"  # type: ignore[index]
    obs = next(e for e in events if e["type"] == "observation")
    assert obs["tool"] == "read"
    print(f"cold: the first abhed run on the demo configuration took {cold_s:.1f} s")
    # Unused now: the keeper stops vLLM after serve.idle_stop_s and removes its socket.
    config = load_config()
    svc = local_service(config.custom_providers[0])
    wait_for(lambda: not svc.keeper_running() and not svc.socket.exists(), 120,
             what="the unused model service to stop")


def test_the_scripted_model_edits_and_runs_a_command_in_the_microvm(
        abhed_home: Path, workspace: Path) -> None:
    from bundle.image import build_image, default_agent_source

    image = build_image("test", agent_source=default_agent_source())
    (workspace / "notes.txt").write_text("code name: Abhed\n")
    steps = [  # read first: an edit of a file the session has not read is refused
        ScriptStep(tool_calls=[{"name": "read", "arguments": {  # type: ignore[list-item]
            "path": f"{workspace}/notes.txt"}}]),
        ScriptStep(tool_calls=[{"name": "edit", "arguments": {  # type: ignore[list-item]
            "path": f"{workspace}/notes.txt", "old_string": "Abhed", "new_string": "Abhed (edited)"}}]),
        ScriptStep(tool_calls=[{"name": "bash", "arguments": {  # type: ignore[list-item]
            "command": "cat notes.txt; uname -r", "description": "show the edit and the kernel"}}]),
        ScriptStep(text="Edited, and the shell ran in the microVM."),
    ]
    with ScriptedServer(steps) as server:
        (abhed_home / "config.json").write_text(json.dumps({
            "custom_providers": [{"name": "scripted", "api": "openai", "base_url": server.base_url,
                                  "model": "scripted"}],
            "sandbox": {"backend": "microvm", "image_dir": str(image)},
            "loop": {"max_turns": 4}}))
        t0 = time.monotonic()
        proc = abhed("run", "edit the notes, then show them", "--workspace", str(workspace),
                     "--mode", "auto", "--json", timeout=600)
        took_s = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    obs = {e["tool"]: e for e in _events(proc.stdout) if e["type"] == "observation"}
    assert obs["edit"]["result"]["ok"], obs["edit"]  # type: ignore[index]
    assert (workspace / "notes.txt").read_text() == "code name: Abhed (edited)\n"
    bash = obs["bash"]["result"]  # type: ignore[index]
    assert bash["details"]["sandbox"] == "microvm", bash  # type: ignore[index]
    assert "code name: Abhed (edited)" in bash["content"]  # type: ignore[index]
    print(f"the scripted edit and command in the microVM took {took_s:.1f} s (boot included)")
