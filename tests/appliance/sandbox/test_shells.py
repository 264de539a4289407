"""One shell per agent in the session's sandbox, on every backend: a subagent's `cd`, its
interrupt and its jobs are its own, while the workspace and the machine are shared.

The microVM case boots the test image (``bundle/image/recipes/test.json``, built once and
cached by its inputs, the guest runner included): slow.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.sandbox import (
    AgentShell,
    BwrapSandbox,
    HostSandbox,
    MicroVM,
    SandboxSettings,
    shell_for,
)
from tests.helpers import wait_for
from tools import ToolContext, ToolResult, Workspace, run_tool
from tools.bash import Bash

# kill_grace_s: the interrupt test asserts the command died of SIGTERM; under TCG on a loaded
# machine the guest's report took longer than half a second and the SIGKILL after the grace
# came first (seen once in the whole suite).  Nothing here ignores SIGTERM, so a longer grace
# costs no time.  (The microVM's guest runner gets it at hello, feature "grace".)
SETTINGS = SandboxSettings(memory_mib=512, vcpus=1, kill_grace_s=5.0, boot_timeout_s=300)


@pytest.fixture(scope="module", params=["host", "bwrap",
                                        pytest.param("microvm", marks=pytest.mark.slow)])
def parent(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentShell]:
    ws = str(tmp_path_factory.mktemp(f"shells-{request.param}").resolve())
    backend: Any
    if request.param == "host":
        backend = HostSandbox(ws, SETTINGS)
    elif request.param == "bwrap":
        backend = BwrapSandbox(ws, SETTINGS)
    else:
        from bundle.image import build_image, default_agent_source

        backend = MicroVM(ws, build_image("test", agent_source=default_agent_source()), SETTINGS)
    shell = AgentShell(backend, "s-parent")
    yield shell
    shell.close()


def bash(shell: Any, command: str | None = None, **kw: Any) -> ToolResult:
    args: dict[str, Any] = {"description": "test step", **kw}
    if command is not None:
        args["command"] = command
    return run_tool(Bash(), args, ToolContext(workspace=Workspace(shell.workspace), sandbox=shell))


def test_a_childs_cd_moves_neither_its_parent_nor_its_sibling(parent: AgentShell) -> None:
    ws = Path(parent.workspace)
    for name in ("a-dir", "b-dir"):
        (ws / name).mkdir(exist_ok=True)
    parent.cwd = parent.workspace
    a, b = shell_for(parent, "s-child-a"), shell_for(parent, "s-child-b")
    assert isinstance(a, AgentShell) and isinstance(b, AgentShell)
    try:
        assert "[working directory is now" in bash(a, "cd a-dir").content
        assert "[working directory is now" in bash(b, "cd b-dir && export X=1").content
        assert bash(a, "pwd").content.splitlines()[0] == str(ws / "a-dir")
        assert bash(b, "pwd").content.splitlines()[0] == str(ws / "b-dir")
        assert bash(parent, "pwd").content.splitlines()[0] == str(ws)  # not moved
        # The workspace is shared: what one agent writes, the others see.
        bash(a, "echo from-a > shared.txt")
        assert bash(parent, "cat a-dir/shared.txt").content.splitlines()[0] == "from-a"
        # The environment is fresh for every command, whoever ran the last one.
        assert bash(b, "echo \"X=${X:-unset}\"").content.splitlines()[0] == "X=unset"
    finally:
        a.close()
        b.close()


def test_interrupting_one_agent_stops_its_command_and_keeps_its_output(parent: AgentShell) -> None:
    ws = Path(parent.workspace)
    child = shell_for(parent, "s-child")
    assert child is not None
    box: dict[str, ToolResult] = {}
    parent.cwd = child.cwd = parent.workspace
    threads = [
        threading.Thread(target=lambda: box.update(child=bash(
            child, "echo before; touch child.ready; sleep 30; echo after"))),
        threading.Thread(target=lambda: box.update(parent=bash(
            parent, "touch parent.ready; sleep 2; echo parent-done"))),
    ]
    try:
        for t in threads:
            t.start()
        wait_for(lambda: (ws / "child.ready").exists() and (ws / "parent.ready").exists(), 60,
                 what="both commands to start")
        child.interrupt()  # the child's deadline, say
        for t in threads:
            t.join(60)
    finally:
        child.close()
        for name in ("child.ready", "parent.ready"):
            (ws / name).unlink(missing_ok=True)
    assert "before" in box["child"].content and "after" not in box["child"].content
    if box["child"].details.get("sandbox") == "microvm":
        # The guest runner SIGKILLs after its own 2 s grace (the known gap in SETTINGS'
        # comment): under TCG the group is sometimes still there then. Stopped, with the
        # output kept, is what this test is about; the signal order is the guest's gap.
        assert re.search(r"\[killed by SIG(TERM|KILL)\]", box["child"].content)
    else:
        assert "[killed by SIGTERM]" in box["child"].content
    assert box["parent"].content.splitlines()[0] == "parent-done"  # the sibling ran on


def test_a_job_belongs_to_the_agent_that_started_it(parent: AgentShell) -> None:
    child = shell_for(parent, "s-child-jobs")
    assert child is not None
    started = bash(child, "sleep 300", background=True)
    job = started.details["job_id"]
    theirs = bash(parent, job_id=job)
    assert theirs.error is not None and theirs.error.code == "unknown_job"
    mine = bash(parent, "sleep 300", background=True).details["job_id"]
    child.close()  # the child ended: its jobs end, the parent's stay
    assert "still running" in bash(parent, job_id=mine).content
    assert parent.sandbox.job(job).state == "killed"
    bash(parent, job_id=mine, kill=True)
