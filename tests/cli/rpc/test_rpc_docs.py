"""The Python client in docs/rpc.md works as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from models.scripted import ScriptedServer
from tests.appliance.helpers import write_config

DOC = Path(__file__).resolve().parents[3] / "docs" / "rpc.md"


def test_the_documented_client_runs(abhed_home: Path, workspace: Path, tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)[-1]
    script = tmp_path / "client.py"
    script.write_text(code)
    (workspace / "n.txt").write_text("x")
    with ScriptedServer([{"tool_calls": [{"name": "read", "arguments": {"path": str(workspace / "n.txt")}}]},
                         {"text": "the file holds x"}]) as server:
        write_config(abhed_home, server.base_url)
        env = os.environ.copy()
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        proc = subprocess.run([sys.executable, str(script), str(workspace), "what is in n.txt?"],
                              check=False, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "the file holds x\n"
    assert "tool: read" in proc.stderr
