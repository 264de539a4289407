"""The Python client in docs/acp.md works as written, against `abhed` on PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from models.scripted import ScriptedServer
from tests.cli.acp.helpers import write_config

DOC = Path(__file__).resolve().parents[3] / "docs" / "acp.md"


def test_the_documented_client_runs(abhed_home: Path, workspace: Path, tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)[-1]
    script = tmp_path / "client.py"
    script.write_text(code)
    target = workspace / "n.txt"
    with ScriptedServer([{"tool_calls": [{"name": "write", "arguments": {"path": str(target),
                                                                         "content": "x\n"}}]},
                         {"text": "Wrote n.txt."}]) as server:
        write_config(abhed_home, server.base_url, policy={"mode": "ask"})
        env = os.environ.copy()
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        proc = subprocess.run([sys.executable, str(script), str(workspace), "write n.txt"],
                              check=False, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"[edit] write {target}" in proc.stdout and f"allow write {target}?" in proc.stdout
    assert "Wrote n.txt." in proc.stdout and proc.stdout.rstrip().endswith("end_turn")
    assert target.read_text() == "x\n"
