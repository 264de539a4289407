"""The bash tool, for real, in a booted microVM and in bubblewrap (one sandbox per
backend for this module): isolation, limits, lifecycle, output shaping.

The microVM runs the test image (``bundle/image/recipes/test.json``), built
once and cached under ``~/.cache/abhed/images`` keyed by its inputs.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.sandbox import BwrapSandbox, HostSandbox, MicroVM, SandboxSettings
from bundle.image import build_image, default_agent_source
from tools import ToolContext, ToolResult, Workspace, run_tool
from tools.bash import Bash

pytestmark = pytest.mark.slow

SETTINGS = SandboxSettings(memory_mib=512, vcpus=1, kill_grace_s=1.0,
                           max_output_bytes=2 * 1024 * 1024, boot_timeout_s=300)


def _markers_alive(marker: str) -> list[str]:
    """Host processes whose command line holds ``marker`` (bwrap/host children are visible here)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd and "pytest" not in cmd:
            found.append(f"{pid}: {cmd}")
    return found


@pytest.fixture(scope="module", params=["microvm", "bwrap"])
def box(request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # A space, a quote and non-ASCII in the path: it crosses the kernel command
    # line (microvm) and bubblewrap's argv (bwrap) and must arrive intact.
    ws = str(tmp_path_factory.mktemp(f"bash ws-é'{request.param}").resolve())
    sandbox: Any
    if request.param == "microvm":
        image = build_image("test", agent_source=default_agent_source())
        sandbox = MicroVM(ws, image, SETTINGS)
        sandbox.boot()
    else:
        sandbox = BwrapSandbox(ws, SETTINGS)
    yield sandbox
    sandbox.close()


class Shell:
    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.ws = Path(sandbox.workspace)
        self.tool = Bash()
        self.ctx = ToolContext(workspace=Workspace(sandbox.workspace), sandbox=sandbox)

    def __call__(self, command: str | None = None, **kw: Any) -> ToolResult:
        args: dict[str, Any] = {"description": "test step", **kw}
        if command is not None:
            args["command"] = command
        return run_tool(self.tool, args, self.ctx)


@pytest.fixture
def sh(box: Any) -> Shell:
    box.cwd = box.workspace
    return Shell(box)


def _out(result: ToolResult) -> str:
    assert result.ok, result.content
    return result.content


# -- isolation -------------------------------------------------------------

def test_microvm_runs_under_a_different_kernel_than_the_host(sh: Shell) -> None:
    kernel = _out(sh("uname -r")).splitlines()[0]
    if sh.sandbox.backend == "microvm":
        assert kernel != os.uname().release
        assert kernel == sh.sandbox.guest_kernel
    else:
        assert kernel == os.uname().release  # bwrap shares the host kernel, by design


def test_no_network_interface_but_lo(sh: Shell) -> None:
    out = _out(sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"))
    assert out.splitlines()[0] == "lo"
    assert out.splitlines()[1].startswith("[exit code 0]")


def test_files_written_inside_appear_in_the_host_workspace(sh: Shell) -> None:
    out = _out(sh("mkdir -p made && printf 'from the sandbox\\n' > made/hello.txt && echo done"))
    assert "done" in out
    assert (sh.ws / "made" / "hello.txt").read_text() == "from the sandbox\n"
    (sh.ws / "from-host.txt").write_text("host wrote this\n")
    assert "host wrote this" in _out(sh(f"cat {shlex.quote(str(sh.ws))}/from-host.txt"))


def test_host_paths_outside_the_workspace_are_invisible(sh: Shell) -> None:
    secret = sh.ws.parent / "outside-secret.txt"
    secret.write_text("s3cret\n")
    res = sh(f"cat {shlex.quote(str(secret))}; ls {shlex.quote(str(sh.ws.parent))}; "
             "ls /work /home/* 2>&1")
    assert res.ok
    assert "s3cret" not in res.content
    assert "outside-secret.txt" not in res.content.splitlines()  # not listed by ls
    assert "No such file" in res.content
    assert "cannot access '/work'" in res.content
    assert "[exit code 0]" not in res.content


def test_host_secrets_in_the_environment_never_reach_the_sandbox(
        sh: Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak-1234")
    monkeypatch.setenv("OPENAI_API_KEY", "do-not-leak-5678")
    monkeypatch.setenv("TZ", "Europe/Paris")  # on the allow-list
    out = _out(sh("env"))
    assert "do-not-leak" not in out
    assert "TZ=Europe/Paris" in out


def test_environment_is_non_interactive_and_stdin_is_closed(sh: Shell) -> None:
    out = _out(sh("env; cat; echo cat-returned", timeout_ms=30_000))
    for pair in ("GIT_EDITOR=true", "GIT_PAGER=cat", "PAGER=cat", "CI=1",
                 "DEBIAN_FRONTEND=noninteractive"):
        assert pair in out
    assert "cat-returned" in out


# -- results ---------------------------------------------------------------

def test_non_zero_exit_is_an_observation_not_a_tool_error(sh: Shell) -> None:
    res = sh("echo to-stdout; echo to-stderr >&2; exit 3")
    assert res.ok and res.error is None
    assert res.details["exit_code"] == 3
    assert res.content.splitlines() == ["to-stdout", "to-stderr", "[exit code 3]"]


def test_cwd_persists_but_shell_state_does_not(sh: Shell) -> None:
    res = sh("mkdir -p sub/deeper && cd sub/deeper && export FOO=bar && myfn() { echo x; }")
    assert f"[working directory is now {sh.ws}/sub/deeper]" in res.content
    out = _out(sh('pwd; echo "FOO=[$FOO]"; type myfn 2>&1 || true'))
    assert out.splitlines()[0] == f"{sh.ws}/sub/deeper"
    assert "FOO=[]" in out
    assert "not found" in out


def test_a_cd_out_of_the_workspace_is_not_carried(sh: Shell) -> None:
    res = sh("cd /")
    assert "outside the workspace" in res.content
    assert _out(sh("pwd")).splitlines()[0] == str(sh.ws)


def test_a_deleted_working_directory_falls_back_to_the_root(sh: Shell) -> None:
    _out(sh("mkdir -p gone && cd gone"))
    (sh.ws / "gone").rmdir()
    res = sh("pwd")
    assert res.content.splitlines()[0] == str(sh.ws)
    assert "no longer exists" in res.content


def test_long_output_keeps_head_and_tail_within_the_cap(sh: Shell) -> None:
    res = sh("echo FIRST-LINE; head -c 200000 /dev/zero | tr '\\0' 'a'; echo; echo LAST-LINE")
    assert res.ok and res.truncated
    assert len(res.content) <= 30_000
    assert res.content.startswith("FIRST-LINE")
    assert "LAST-LINE" in res.content[-200:]
    assert "cut from the middle" in res.content
    assert res.details["output_bytes"] > 200_000


def test_output_overflow_kills_and_says_it_is_not_a_failure(sh: Shell) -> None:
    res = sh("yes overflow")
    assert res.ok
    assert res.details["output_limited"] is True
    assert "output overflow" in res.content


def test_invalid_utf8_output_is_shown_not_fatal(sh: Shell) -> None:
    res = sh("printf 'ok \\xff\\xfe end\\n'")
    assert res.ok and "ok \ufffd\ufffd end" in res.content


def test_timeout_kills_the_command_and_its_children(sh: Shell) -> None:
    marker = "987.125"
    res = sh(f"sleep {marker} & (sleep {marker}; true) & sleep {marker}", timeout_ms=1500)
    assert res.ok
    assert res.details["timed_out"] is True
    assert "timed out after 1.5 s" in res.content
    if sh.sandbox.backend == "microvm":
        left = _out(sh("ps -eo args | grep -c '^sleep 987' || true"))
        assert left.splitlines()[0] == "0"
    else:
        assert _markers_alive(f"sleep {marker}") == []


def test_interrupt_stops_the_running_command_from_another_thread(sh: Shell) -> None:
    import threading

    marker = "654.25"
    timer = threading.Timer(1.0, sh.sandbox.interrupt)
    timer.start()
    res = sh(f"sleep {marker}; echo never", timeout_ms=300000)
    timer.join()
    assert res.ok  # a stopped command is an observation, not a tool failure
    assert res.details["signal"] in (15, 9)
    assert "never" not in res.content
    if sh.sandbox.backend == "microvm":
        assert _out(sh("ps -eo args | grep -c '^sleep 654' || true")).splitlines()[0] == "0"
    else:
        assert _markers_alive(f"sleep {marker}") == []
    assert "after" in _out(sh("echo after"))  # the sandbox still works afterwards


def test_processes_left_by_a_finished_command_are_reaped(sh: Shell) -> None:
    res = sh("(sleep 765.5 &) ; echo started")
    assert "started" in res.content
    if sh.sandbox.backend == "microvm":
        assert _out(sh("ps -eo args | grep -c '^sleep 765' || true")).splitlines()[0] == "0"
    else:
        assert _markers_alive("sleep 765.5") == []


# -- background jobs -------------------------------------------------------

def test_background_job_output_can_be_read_later_then_killed(sh: Shell) -> None:
    started = sh("echo job-begin; while true; do sleep 0.2; done", background=True)
    assert started.ok, started.content
    job_id = started.details["job_id"]
    deadline_reads = 0
    out = sh(job_id=job_id)
    while "job-begin" not in out.content and deadline_reads < 50:
        deadline_reads += 1
        out = sh("sleep 0.2", timeout_ms=5000)  # let the job run, then read again
        out = sh(job_id=job_id)
    assert "job-begin" in out.content and "still running" in out.content
    again = sh(job_id=job_id)
    assert "job-begin" not in again.content  # only new output on the next read
    killed = sh(job_id=job_id, kill=True)
    assert killed.ok and killed.details["state"] == "killed"
    assert "was stopped" in killed.content


def test_finished_background_job_reports_its_exit_code(sh: Shell) -> None:
    job_id = sh("echo quick; exit 7", background=True).details["job_id"]
    out = sh(job_id=job_id)
    for _ in range(50):
        if out.details["state"] != "running":
            break
        sh("sleep 0.1")
        out = sh(job_id=job_id)
    assert out.details["state"] == "exited" and out.details["exit_code"] == 7
    assert "exit code 7" in out.content


def test_unknown_job_is_an_instructive_error(sh: Shell) -> None:
    res = sh(job_id="job-999")
    assert not res.ok and res.error is not None and res.error.code == "unknown_job"
    assert "background: true" in res.content


# -- argument checks (no sandbox needed, but run against each) ---------------

@pytest.mark.parametrize("args, code", [
    ({"command": "vim notes.txt"}, "interactive_command"),
    ({"command": "git rebase -i HEAD~3"}, "interactive_command"),
    ({"command": "cd src && git add -p"}, "interactive_command"),
    ({"command": "python3"}, "interactive_command"),
    ({"command": "cat log | less"}, "interactive_command"),
    ({"command": "echo hi", "timeout_ms": 600_001}, "invalid_arguments"),
    ({"command": "echo hi", "timeout_ms": 0}, "invalid_arguments"),
    ({"command": "echo hi", "timeout_ms": "10"}, "invalid_arguments"),
    ({"command": "   "}, "invalid_arguments"),
    ({"command": "echo \x00 hi"}, "invalid_arguments"),
    ({"command": "x" * (64 * 1024 + 1)}, "too_large"),
    ({"command": "echo", "job_id": "job-1"}, "invalid_arguments"),
    ({"kill": True, "command": "echo"}, "invalid_arguments"),
    ({}, "invalid_arguments"),
    ({"command": "echo", "rm": "-rf"}, "invalid_arguments"),
])
def test_bad_calls_are_refused_before_anything_runs(sh: Shell, args: dict[str, Any],
                                                     code: str) -> None:
    res = sh(**args)
    assert not res.ok and res.error is not None
    assert res.error.code == code, res.content
    assert "Nothing was run" in res.content or code == "invalid_arguments"


def test_description_is_required(sh: Shell) -> None:
    res = run_tool(sh.tool, {"command": "echo hi"}, sh.ctx)
    assert not res.ok and "`description` is required" in res.content
    res = run_tool(sh.tool, {"command": "echo hi", "description": "  "}, sh.ctx)
    assert not res.ok and "description" in res.content


# -- the host backend and a missing sandbox ----------------------------------

def test_host_backend_says_it_is_unsandboxed(tmp_path: Path) -> None:
    box = HostSandbox(str(tmp_path))
    try:
        res = Shell(box)("echo hi")
        assert res.ok and "UNSANDBOXED" in res.content and res.details["sandbox"] == "host"
    finally:
        box.close()


def test_no_sandbox_means_bash_refuses_with_guidance(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=Workspace(str(tmp_path)))
    res = run_tool(Bash(), {"command": "echo hi", "description": "x"}, ctx)
    assert not res.ok and res.error is not None and res.error.code == "sandbox_unavailable"


def test_a_watcher_hears_the_output_as_it_comes_whole_characters(sh: Shell) -> None:
    import dataclasses
    import time

    heard: list[tuple[float, str]] = []
    ctx = dataclasses.replace(sh.ctx, progress=lambda text: heard.append((time.monotonic(), text)))
    # a UTF-8 character split across two writes, a second apart
    result = run_tool(sh.tool, {"command": "printf 'caf\\303'; sleep 1; printf '\\251 done\\n'",
                                "description": "split"}, ctx)
    ended = time.monotonic()
    assert result.ok and "café done" in result.content
    assert "".join(t for _, t in heard) == "café done\n"
    assert heard[0][0] < ended - 0.5, "the first part arrived while the command still ran"
