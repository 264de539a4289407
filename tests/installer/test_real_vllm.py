"""The built installer's health gate against the real vLLM CPU server.

The other installer tests declare the scripted OpenAI-compatible server; this one
declares real vLLM, so ``/health``, ``/v1/models``, the known-answer prompt and the
agent probe (``abhed run`` from the installed release, a real ``glob`` tool call parsed by
vLLM's hermes tool parser under structured output) all run against vLLM.

What differs from a production bundle, and why (docs/installer.md says the same):

* vLLM and torch are not in the bundle's wheelhouse (hundreds of MB; installing them
  into every test release would cost minutes of CI).  The declared command is the
  release's own Python used as a trampoline to the cached vLLM CPU venv
  (``scripts/vllm-env``); the gate's rule that a command's program lies inside the
  release still holds.
* The model is the tests' tiny model re-wired by ``wired_model.py`` so that greedy
  decoding answers ``5`` and, under a named tool choice for glob, writes
  ``{"pattern":"*"}``; ``--force-tool glob`` in the probe asks for that tool choice.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .conftest import AGENT_CONFIG, PROBE_PROMPT, ROOT, BundleMaker, Installer, Keys, descriptor

pytestmark = pytest.mark.slow

# What the wired model can honestly do: schema-valid calls under a named tool choice, no more.
WIRED_BAR = {"families": ["wire"], "quick_families": ["wire"], "min_rate": {}, "tool_choice": "named",
             "note": "a hand-wired bigram test model: calls only under a named tool choice"}


def _vllm_helpers() -> ModuleType:
    """tests/vllm_server.py (the cached vLLM venv and tiny model), loaded by path."""
    name = "_installer_vllm_helpers"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests/vllm_server.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def real_vllm_descriptor(vllm_python: str) -> dict[str, Any]:
    helpers = _vllm_helpers()
    config = json.loads(json.dumps(AGENT_CONFIG))
    config["custom_providers"][0]["params"] = {"temperature": 0}
    return descriptor(
        command=["{venv}/bin/python", "-c", "import os, sys; os.execv(sys.argv[1], sys.argv[1:])",
                 vllm_python, "-m", "vllm.entrypoints.openai.api_server",
                 "--model", "{model_dir}", "--served-model-name", "{served_name}",
                 "--host", "{host}", "--port", "{port}", "--max-model-len", "8192",
                 "--dtype", "float32", "--chat-template", "{model_dir}/chat_template.jinja",
                 "--enable-auto-tool-choice", "--tool-call-parser", "hermes", *helpers.VLLM_ARGS],
        env=dict(helpers.VLLM_ENV),
        agent_probe=["{venv}/bin/abhed", "run", "--json", "--max-turns", "4",
                     "--force-tool", "glob", "--workspace", "{workspace}", PROBE_PROMPT],
        agent_config=config, startup_timeout_s=900, agent_timeout_s=300)


@pytest.fixture(scope="module")
def wired_model() -> tuple[str, Path]:
    helpers = _vllm_helpers()
    python = helpers.vllm_python()
    return python, helpers.wired_model(python)


def test_install_passes_the_gate_against_real_vllm(inst: Installer, make_bundle: BundleMaker,
                                                  keys: Keys,
                                                  wired_model: tuple[str, Path]) -> None:
    python, model = wired_model
    bundle = make_bundle(1, serve=real_vllm_descriptor(python), script=[],
                         model_from=model, name="abhed-vllm", bar=WIRED_BAR)
    r = inst("install", bundle, "--trust", keys.pub, timeout=1500)
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    assert "gate: healthy: /health 200, serving tiny" in r.stderr
    assert "gate: known answer: answered '5'" in r.stderr
    assert "gate: agent tool call: ok" in r.stderr
    assert os.readlink(inst.prefix / "current") == "releases/1"
    model_log = (inst.prefix / "logs/gate-1-model.log").read_text()
    assert "vllm" in model_log.lower() and "Application startup complete" in model_log
    events = [json.loads(line)["event"] for line in
              (inst.prefix / "logs/gate-1-agent.log").read_text().splitlines()
              if line.startswith('{"type": "event"')]
    turn = next(e for e in events if e["type"] == "model_turn" and e["tool_calls"])
    assert turn["tool_calls"][0]["name"] == "glob"
    assert json.loads(turn["tool_calls"][0]["arguments"]) == {"pattern": "*"}
    seen = next(e for e in events if e["type"] == "observation")
    assert seen["result"]["ok"] and "/PROBE-" in seen["result"]["content"]
    ended = [e for e in events if e["type"] == "run_ended"]  # session_ended may follow it
    assert ended and ended[-1]["reason"] == "done"
    assert ("gate", "ok") in [(e["step"], e["result"]) for e in inst.audit()]
    # The capability probe ran against vLLM with the wired model's own (honest) bar.
    assert ("probe", "ok") in [(e["step"], e["result"]) for e in inst.audit()]
    report = json.loads((inst.prefix / "state/probe/1/report.json").read_text())
    assert report["passed"] and report["families"] == ["wire"] and report["tool_call_parser"] == "hermes"
    # The server's whole process group is gone after the gate.
    ps = subprocess.run(["pgrep", "-f", str(inst.prefix / "releases/1/bundle/models")],
                        capture_output=True)
    assert ps.returncode == 1
