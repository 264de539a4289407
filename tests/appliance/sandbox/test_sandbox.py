"""Sandbox pieces without a VM: the guest agent's wire protocol, the runner's
process lifecycle, bubblewrap's confinement (capabilities, seccomp, Landlock),
backend selection, the image folder checks and ``abhed sandbox check``."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from appliance.sandbox import (
    BwrapSandbox,
    HostSandbox,
    MicroVM,
    SandboxSettings,
    SandboxUnavailable,
    VMImage,
    check_backends,
    open_sandbox,
)
from appliance.sandbox._confine import seccomp_program
from cli import main
from foundation.guest import PROTOCOL_VERSION, Runner, Server
from tests.helpers import wait_for

CONFINE = Path(__file__).resolve().parents[3] / "appliance" / "sandbox" / "_confine.py"


# -- the wire protocol, over a real socket pair -------------------------------

class AgentPeer:
    """The host end of a guest agent served on a socketpair (as over virtio-serial)."""

    def __init__(self) -> None:
        self.host, guest = socket.socketpair()
        self.guest_fd = guest.detach()
        self.server = Server(self.guest_fd, Runner(grace_s=0.5))
        self.server.eof_exits = True
        self.thread = threading.Thread(target=self.server.loop, daemon=True)
        self.thread.start()
        self.buf = b""
        self.host.settimeout(30)

    def send_raw(self, data: bytes) -> None:
        self.host.sendall(data)

    def reply(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = self.host.recv(65536)
            assert chunk, "agent closed the channel"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        obj = json.loads(line)
        assert isinstance(obj, dict)
        return obj

    def call(self, **req: Any) -> dict[str, Any]:
        self.send_raw((json.dumps(req) + "\n").encode())
        return self.reply()

    def close(self) -> None:
        self.server.runner.close()
        self.host.close()
        self.thread.join(5)
        os.close(self.guest_fd)


@pytest.fixture
def agent() -> Any:
    peer = AgentPeer()
    yield peer
    peer.close()


def test_agent_hello_names_protocol_and_kernel(agent: AgentPeer) -> None:
    r = agent.call(id=1, op="hello")
    assert r["id"] == 1 and r["ok"] is True
    assert r["result"]["protocol"] == PROTOCOL_VERSION
    assert r["result"]["kernel"] == os.uname().release


def test_hello_sets_the_hosts_grace_and_refuses_a_bad_one(agent: AgentPeer) -> None:
    r = agent.call(id=1, op="hello", grace_s=7.5)
    assert r["ok"] and "grace" in r["result"]["features"]
    assert agent.server.runner.grace_s == 7.5
    for i, bad in enumerate(["5", True, -1, 601, None, [1], float("inf")], start=2):
        r = agent.call(id=i, op="hello", grace_s=bad)
        assert r["ok"] is False and "grace_s must be a number of seconds" in r["error"], bad
    assert agent.server.runner.grace_s == 7.5, "a refused grace changes nothing"
    assert agent.call(id=20, op="hello")["ok"] and agent.server.runner.grace_s == 7.5


def test_agent_runs_a_command_and_reports_everything(agent: AgentPeer, tmp_path: Path) -> None:
    r = agent.call(id=7, op="run", command="cd sub; echo out; echo err >&2; exit 5",
                   cwd=str(tmp_path), env={"PATH": "/usr/bin:/bin"}, timeout_s=20)
    (tmp_path / "sub").mkdir(exist_ok=True)
    res = r["result"]
    assert r["ok"] and res["exit_code"] == 5 and res["signal"] is None
    assert base64.b64decode(res["head_b64"]).endswith(b"out\nerr\n")
    assert res["timed_out"] is False and res["output_limited"] is False
    assert res["cwd"] == str(tmp_path)  # `cd sub` failed: sub did not exist yet


def test_agent_background_job_round_trip(agent: AgentPeer, tmp_path: Path) -> None:
    started = agent.call(id=1, op="start", command="echo bg-line; sleep 60", cwd=str(tmp_path),
                         env={"PATH": "/usr/bin:/bin"})
    job_id = started["result"]["job_id"]
    ids = iter(range(10, 10**6))

    def first_line() -> dict[str, Any] | None:
        seen: dict[str, Any] = agent.call(id=next(ids), op="job", job_id=job_id, offset=0)["result"]
        return seen if seen["data_b64"] else None

    seen = wait_for(first_line, 15, poll_s=0.05, what="the job's first line")
    assert seen["state"] == "running"
    killed = agent.call(id=2, op="job", job_id=job_id, offset=0, kill=True)["result"]
    assert killed["state"] == "killed" and killed["signal"] is not None
    assert base64.b64decode(killed["data_b64"]) == b"bg-line\n"
    assert killed["next_offset"] == len(b"bg-line\n")


@pytest.mark.parametrize("line, expect", [
    (b"not json\n", "bad request line"),
    (b"[1, 2]\n", "must be a JSON object"),
    (b'{"id": 3, "op": "format-disk"}\n', "unknown op"),
    (b'{"id": 4, "op": "run"}\n', "KeyError"),
    (b'{"id": 5, "op": "job", "job_id": "job-42"}\n', "no background job"),
    (b'{"id": 6, "op": "run", "command": "echo \\u0000", "cwd": "/", "env": {}, "timeout_s": 1}\n',
     "NUL"),
])
def test_agent_answers_malformed_requests_with_an_error(agent: AgentPeer, line: bytes,
                                                        expect: str) -> None:
    agent.send_raw(line)
    r = agent.reply()
    assert r["ok"] is False and expect in r["error"]
    assert agent.call(id=99, op="hello")["ok"]  # and keeps serving


def test_agent_survives_an_oversized_request(agent: AgentPeer) -> None:
    big = json.dumps({"id": 1, "op": "hello", "pad": "x" * 3_000_000}).encode() + b"\n"
    agent.send_raw(big)
    assert agent.reply()["ok"] is True


def test_agent_serves_requests_concurrently(agent: AgentPeer, tmp_path: Path) -> None:
    agent.send_raw((json.dumps({"id": 1, "op": "run", "command": "sleep 5", "cwd": str(tmp_path),
                                "env": {}, "timeout_s": 0.5}) + "\n").encode())
    agent.send_raw(b'{"id": 2, "op": "hello"}\n')
    first = agent.reply()
    assert first["id"] == 2  # hello was not stuck behind the running command
    assert agent.reply()["result"]["timed_out"] is True


# -- the runner's lifecycle -----------------------------------------------------

def test_runner_keeps_head_and_tail_and_counts_everything(tmp_path: Path) -> None:
    r = Runner(keep_bytes=1000).run("seq 1 100000", str(tmp_path), {"PATH": "/usr/bin:/bin"}, 30)
    head, tail = base64.b64decode(r["head_b64"]), base64.b64decode(r["tail_b64"])
    assert head.startswith(b"1\n2\n") and tail.endswith(b"99999\n100000\n")
    assert len(head) == len(tail) == 1000
    assert r["output_bytes"] == len(b"".join(b"%d\n" % i for i in range(1, 100001)))


def test_runner_grace_then_sigkill_for_a_command_that_ignores_sigterm(tmp_path: Path) -> None:
    r = Runner(grace_s=0.3).run("trap '' TERM; sleep 30", str(tmp_path), {"PATH": "/usr/bin:/bin"},
                                0.5)
    assert r["timed_out"] is True and r["signal"] == 9


def test_jobs_die_with_the_session(tmp_path: Path) -> None:
    box = HostSandbox(str(tmp_path))
    job = box.start("sleep 543.25", cwd=str(tmp_path), env={})
    pid = box._runner._jobs[job].proc.pid
    box.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- bubblewrap confinement -----------------------------------------------------

@pytest.mark.slow
def test_bwrap_drops_capabilities_and_installs_seccomp_and_landlock(tmp_path: Path) -> None:
    box = BwrapSandbox(str(tmp_path))
    try:
        run = box.run("grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; "
                      "unshare -U true && echo UNSHARED; mount -t tmpfs x /tmp && echo MOUNTED; "
                      "touch /usr/evil && echo WROTE-USR; hostname",
                      cwd=str(tmp_path), env={}, timeout_s=30)
    finally:
        box.close()
    out = (run.head + run.tail).decode()
    assert "CapEff:\t0000000000000000" in out and "CapBnd:\t0000000000000000" in out
    assert "NoNewPrivs:\t1" in out and "Seccomp:\t2" in out
    assert "UNSHARED" not in out and "MOUNTED" not in out and "WROTE-USR" not in out
    assert "abhed-sandbox" in out


def test_landlock_allows_writes_only_beneath_the_given_dirs(tmp_path: Path) -> None:
    allowed, other = tmp_path / "ws", tmp_path / "other"
    allowed.mkdir()
    other.mkdir()
    proc = subprocess.run(
        ["/usr/bin/python3", "-I", "-S", str(CONFINE), str(allowed), "--", "/bin/sh", "-c",
         (f"echo a > {allowed}/ok && echo wrote-ok; echo b > {other}/no && echo wrote-other; "
          f"cat {other}/../ws/ok")],
        capture_output=True, text=True, timeout=30, env={"ABHED_CONFINE_STRICT": "1"},
        check=False)
    assert "wrote-ok" in proc.stdout and "wrote-other" not in proc.stdout
    assert "Permission denied" in proc.stderr
    assert not (other / "no").exists()
    assert proc.stdout.splitlines()[-1] == "a"  # reading stays allowed


def test_confine_refuses_a_missing_separator_or_command() -> None:
    for argv in ([str(CONFINE), "/tmp"], [str(CONFINE), "/tmp", "--"]):
        proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=30,
                              check=False)
        assert proc.returncode != 0 and "_confine.py" in proc.stderr


def test_seccomp_program_is_well_formed() -> None:
    prog = seccomp_program()
    assert len(prog) % 8 == 0 and 10 < len(prog) // 8 < 4096  # kernel limit is 4096
    assert prog[-8:-4] == b"\x06\x00\x00\x00"  # last instruction: RET


# -- choosing a backend -----------------------------------------------------------

def test_auto_without_an_image_falls_back_to_bwrap(tmp_path: Path) -> None:
    box = open_sandbox(tmp_path)
    try:
        assert box.backend == "bwrap"
    finally:
        box.close()


def test_host_is_used_only_when_set(tmp_path: Path) -> None:
    box = open_sandbox(tmp_path, SandboxSettings(backend="host"))
    try:
        assert box.backend == "host"
    finally:
        box.close()


def test_microvm_without_an_image_says_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="python -m bundle.image build"):
        open_sandbox(tmp_path, SandboxSettings(backend="microvm", image_dir=str(tmp_path / "x")))


def test_a_missing_image_folder_is_said_not_to_exist_not_to_be_incomplete(tmp_path: Path) -> None:
    # The bug: a folder that does not exist was "incomplete (missing vmlinuz, ...)", and the
    # advice did not say where the build writes the image or that it needs root and debootstrap.
    with pytest.raises(SandboxUnavailable) as gone:
        VMImage.load(tmp_path / "image")
    said = str(gone.value)
    assert f"microVM image folder {tmp_path / 'image'} does not exist" in said
    assert "incomplete" not in said
    for part in ("root or passwordless sudo", "debootstrap", "~/.cache/abhed/images/default-KEY",
                 "`python -m bundle.image build --recipe default`", "sandbox.image_dir",
                 f"`ln -sfn \"$(python -m bundle.image build --recipe default)\" {tmp_path / 'image'}`"):
        assert part in said, part
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "vmlinuz").write_bytes(b"")
    with pytest.raises(SandboxUnavailable, match=r"is incomplete \(missing initrd.img, rootfs.ext4, "
                                                 r"manifest.json\); build one"):
        VMImage.load(tmp_path / "image")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(SandboxUnavailable, match="is not a folder; build one"):
        VMImage.load(tmp_path / "file")


@pytest.mark.parametrize("manifest", [b"{not json", b"[]"])
def test_a_broken_image_manifest_is_refused(tmp_path: Path, manifest: bytes) -> None:
    for name in ("vmlinuz", "initrd.img", "rootfs.ext4"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "manifest.json").write_bytes(manifest)
    with pytest.raises(SandboxUnavailable, match=r"(not valid JSON|must be a JSON object)[\s\S]*Rebuild the image"):
        VMImage.load(tmp_path)


def test_a_vm_that_cannot_boot_reports_why(tmp_path: Path) -> None:
    for name in ("vmlinuz", "initrd.img", "rootfs.ext4"):
        (tmp_path / name).write_bytes(b"garbage")
    (tmp_path / "manifest.json").write_text("{}")
    vm = MicroVM(str(tmp_path), tmp_path, SandboxSettings(accel="tcg", boot_timeout_s=5))
    with pytest.raises(SandboxUnavailable) as info:
        vm.boot()
    assert "QEMU" in str(info.value) or "VM" in str(info.value)
    vm.close()


def test_config_rejects_unknown_or_bad_sandbox_settings() -> None:
    from pydantic import ValidationError
    with pytest.raises(ValidationError):
        SandboxSettings.model_validate({"backend": "docker"})
    with pytest.raises(ValidationError):
        SandboxSettings.model_validate({"memory_mib": 1})
    with pytest.raises(ValidationError):
        SandboxSettings.model_validate({"network": True})


# -- abhed sandbox check ------------------------------------------------------------

def test_check_reports_each_backend_and_why(tmp_path: Path) -> None:
    reports = {r.backend: r for r in check_backends(
        SandboxSettings(image_dir=str(tmp_path / "none")), boot=False)}
    assert set(reports) == {"microvm", "bwrap", "host"}
    assert not reports["microvm"].ok and "does not exist" in reports["microvm"].reason
    assert reports["bwrap"].ok and reports["bwrap"].command_ms is not None
    assert "only used when" in reports["host"].reason


def test_cli_sandbox_check_json(abhed_home: Path) -> None:
    result = CliRunner().invoke(main, ["sandbox", "check", "--json", "--no-boot"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["configured"] == "auto" and data["usable"] is True
    assert [b["backend"] for b in data["backends"]] == ["microvm", "bwrap", "host"]


def test_cli_sandbox_check_fails_when_the_configured_backend_cannot_run(abhed_home: Path) -> None:
    (abhed_home / "config.json").write_text(json.dumps({"sandbox": {"backend": "microvm"}}))
    result = CliRunner().invoke(main, ["sandbox", "check", "--no-boot"])
    assert result.exit_code == 1
    assert "FAIL microvm" in result.output


def test_agent_interrupt_with_an_owner_stops_only_that_owners_command(
        agent: AgentPeer, tmp_path: Path) -> None:
    # One shell per agent: a subagent's deadline stops its own command, never its sibling's.
    env = {"PATH": "/usr/bin:/bin"}
    agent.send_raw((json.dumps({"id": 1, "op": "run", "owner": "child-a", "env": env,
                                "command": "echo started-a; touch a.ready; sleep 30; echo after",
                                "cwd": str(tmp_path), "timeout_s": 60}) + "\n").encode())
    agent.send_raw((json.dumps({"id": 2, "op": "run", "owner": "child-b", "env": env,
                                "command": "touch b.ready; sleep 1.5; echo done-b",
                                "cwd": str(tmp_path), "timeout_s": 60}) + "\n").encode())
    wait_for(lambda: (tmp_path / "a.ready").exists() and (tmp_path / "b.ready").exists(), 20,
             what="both commands to start")
    agent.send_raw(b'{"id": 3, "op": "interrupt", "owner": "child-a"}\n')
    replies = {r["id"]: r for r in (agent.reply(), agent.reply(), agent.reply())}
    assert replies[3]["result"] == {"stopped": 1}
    a, b = replies[1]["result"], replies[2]["result"]
    assert a["signal"] == 15 and base64.b64decode(a["head_b64"]) == b"started-a\n"  # output kept
    assert b["exit_code"] == 0 and base64.b64decode(b["head_b64"]) == b"done-b\n"


def test_agent_release_ends_only_that_owners_jobs(agent: AgentPeer, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    mine = agent.call(id=1, op="start", owner="child", command="sleep 300", cwd=str(tmp_path),
                      env=env)["result"]["job_id"]
    theirs = agent.call(id=2, op="start", owner="parent", command="sleep 300", cwd=str(tmp_path),
                        env=env)["result"]["job_id"]
    assert agent.call(id=3, op="release", owner="child")["result"] == {"killed": 1}
    assert agent.call(id=4, op="job", job_id=mine)["result"]["state"] == "killed"
    assert agent.call(id=5, op="job", job_id=theirs)["result"]["state"] == "running"


def test_agent_streams_a_runs_output_as_it_comes_when_asked(agent: AgentPeer, tmp_path: Path) -> None:
    assert "stream" in agent.call(id=1, op="hello")["result"]["features"]
    agent.send_raw((json.dumps({"id": 2, "op": "run", "command": "echo one; sleep 0.4; echo two",
                                "cwd": str(tmp_path), "env": {"PATH": "/usr/bin:/bin"},
                                "timeout_s": 20, "stream": True}) + "\n").encode())
    seen = b""
    while True:
        line = agent.reply()
        assert line["id"] == 2
        if "ok" in line:
            break
        assert line["skipped"] == 0
        seen += base64.b64decode(line["output_b64"])
        if seen == b"one\n":
            interim_before_end = True
    assert interim_before_end and seen == b"one\ntwo\n"  # it came in parts, all of it
    assert base64.b64decode(line["result"]["head_b64"]) == b"one\ntwo\n"
    plain = agent.call(id=3, op="run", command="echo quiet", cwd=str(tmp_path),
                       env={"PATH": "/usr/bin:/bin"}, timeout_s=20)
    assert plain["ok"]  # without "stream", no interim lines: the reply comes first


def test_runner_tells_a_watcher_the_output_bounded_and_survives_a_broken_one(tmp_path: Path) -> None:
    box = HostSandbox(str(tmp_path))
    try:
        heard: list[bytes] = []
        run = box.run("printf 'a'; sleep 0.2; printf 'b'", cwd=str(tmp_path), env={},
                      timeout_s=20, on_output=heard.append)
        assert b"".join(heard) == b"ab" and len(heard) == 2 and run.exit_code == 0

        def broken(chunk: bytes) -> None:
            raise RuntimeError("the watcher went away")
        run = box.run("echo x; echo y", cwd=str(tmp_path), env={}, timeout_s=20,
                      on_output=broken)
        assert run.exit_code == 0 and run.head == b"x\ny\n"  # the command is not the watcher's
    finally:
        box.close()
