"""Shared fixtures for the file-tool tests: a workspace, a context, a caller.

Every test drives the tools the way the agent does: through
:func:`tools.run_tool` with a :class:`tools.ToolContext`, and a ledger that
remembers what each result reports (``details.file_state``), exactly as the
session does from the event log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tools import (
    MemoryLedger,
    ToolContext,
    ToolResult,
    ToolSettings,
    Workspace,
    native_tools,
    run_tool,
)

REPO = Path(__file__).resolve().parents[2]
ABHED = Path(sys.executable).parent / "abhed"


class Harness:
    """Calls native tools on one workspace with one session ledger."""

    def __init__(self, root: Path, settings: ToolSettings | None = None,
                 ledger: MemoryLedger | None = None) -> None:
        self.root = root
        self.settings = settings or ToolSettings()
        self.ledger = ledger or MemoryLedger()
        self.tools = native_tools()

    @property
    def ctx(self) -> ToolContext:
        ws = Workspace(str(self.root), self.settings.secret_paths)
        return ToolContext(workspace=ws, settings=self.settings, ledger=self.ledger)

    def with_settings(self, **changes: Any) -> Harness:
        """Same workspace and session, other operator settings."""
        return Harness(self.root, self.settings.model_copy(update=changes), self.ledger)

    def fresh_session(self) -> Harness:
        return Harness(self.root, self.settings)

    def call(self, name: str, args: Any) -> ToolResult:
        result = run_tool(self.tools[name], args, self.ctx)
        # The result must always be the documented shape, whatever happened.
        assert set(json.loads(result.model_dump_json())) == {"ok", "content", "truncated", "error", "details"}
        if not result.ok:
            assert result.error is not None and result.error.code and result.content
            assert result.error.code != "internal_error", result.content
        self.ledger.observe(result)
        return result

    def read(self, path: Path | str, **kw: Any) -> ToolResult:
        return self.call("read", {"path": str(path), **kw})

    def read_new(self, data: bytes, name: str = "f.txt") -> Path:
        """A file ``name`` in the workspace holding ``data``, read once in this session (so
        edit and write may change it)."""
        target = self.root / name
        target.write_bytes(data)
        self.ok(self.read(target))
        return target

    def write(self, path: Path | str, content: str) -> ToolResult:
        return self.call("write", {"path": str(path), "content": content})

    def edit(self, path: Path | str, old: str, new: str, **kw: Any) -> ToolResult:
        return self.call("edit", {"path": str(path), "old_string": old, "new_string": new, **kw})

    def glob(self, pattern: str, path: Path | str | None = None) -> ToolResult:
        args: dict[str, Any] = {"pattern": pattern}
        if path is not None:
            args["path"] = str(path)
        return self.call("glob", args)


    @staticmethod
    def ok(result: ToolResult) -> ToolResult:
        assert result.ok, result.content
        return result

    @staticmethod
    def err(result: ToolResult, code: str) -> ToolResult:
        assert not result.ok, result.content
        assert result.error is not None
        assert result.error.code == code, (result.error.code, result.content)
        return result


@pytest.fixture
def h(workspace: Path) -> Harness:
    return Harness(workspace)


@pytest.fixture
def cli(abhed_home: Path) -> Callable[..., tuple[int, dict[str, Any] | None, str, str]]:
    """Run the real ``abhed tool`` in a subprocess; returns (rc, result, stdout, stderr)."""

    def run(*argv: str, env: dict[str, str] | None = None, user: int | None = None,
            timeout: float = 60) -> tuple[int, dict[str, Any] | None, str, str]:
        # --yes: these tests are about the tools, not policy; a call policy
        # asks about is approved as the person at the command line would.
        cmd = [str(ABHED), "tool", *argv, "--yes"]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        full_env = {**os.environ, "ABHED_HOME": str(abhed_home), **(env or {})}
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=full_env, timeout=timeout,
                              cwd=REPO)
        lines = proc.stdout.strip().splitlines()
        result = None
        if lines:
            try:
                result = json.loads(lines[-1])
            except json.JSONDecodeError:
                result = None
        return proc.returncode, result, proc.stdout, proc.stderr

    return run
