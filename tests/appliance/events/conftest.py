"""The real `abhed` binary, run as this test's ABHED_HOME (optionally as another Unix user)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.appliance.events.logs import ABHED, REPO, Cli


@pytest.fixture
def abhed(abhed_home: Path) -> Cli:
    """Run the real ``abhed`` with this test's ABHED_HOME; never raises on a non-zero exit."""

    def run(*argv: str, user: int | None = None, home: Path | None = None, timeout: float = 120,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [str(ABHED), *argv]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        env = {**os.environ, "ABHED_HOME": str(home or abhed_home)}
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                              cwd=REPO, input=stdin, check=False)

    return run
