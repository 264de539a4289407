"""The gate's private namespaces (installer._isolate), in-process: inside, ``current`` is the
release being gated and only loopback exists; outside, nothing changed; refusals, errors
and results cross back intact.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from installer._errors import HealthCheckFailed, StepFailed
from installer._health import HealthStep
from installer._isolate import _loopback_up, add_address, isolated
from installer._layout import Layout


def _prefix(tmp_path: Path, current: int | None) -> Layout:
    prefix = tmp_path / "opt-abhed"
    for v, mode in ((1, "ask"), (2, "plan")):
        site = prefix / "releases" / str(v) / "site"
        site.mkdir(parents=True)
        (site / "settings.json").write_text(json.dumps({"policy": {"mode": mode}}))
    for d in ("logs", "state", "store/sha256"):
        (prefix / d).mkdir(parents=True)
    (prefix / ".lock").write_text("")
    (prefix / "bin").mkdir()
    os.symlink("../current/venv/bin/abhed", prefix / "bin/abhed")
    if current is not None:
        os.symlink(f"releases/{current}", prefix / "current")
    return Layout(prefix)


@pytest.mark.parametrize("current", [1, None])  # an upgrade, and a first install
def test_inside_current_is_the_gated_release_and_only_loopback_exists(
        tmp_path: Path, current: int | None) -> None:
    layout = _prefix(tmp_path, current)
    outside = socket.socket()
    outside.bind(("127.0.0.1", 0))
    outside.listen()
    port = outside.getsockname()[1]

    def gate() -> list[HealthStep]:
        p = layout.prefix
        (p / "logs" / "gate-2-model.log").write_text("written inside\n")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            reached = True
        except OSError:
            reached = False
        inner = socket.socket()
        inner.bind(("127.0.0.1", 8000))  # the service's port: free in here
        inner.close()
        seen = {"current": os.readlink(p / "current"),
                "settings": json.loads((p / "current/site/settings.json").read_text()),
                "entries": sorted(os.listdir(p)), "bin": os.readlink(p / "bin/abhed"),
                "interfaces": [name for _, name in socket.if_nameindex()],
                "reached_outside": reached, "prefix_mode": oct(p.stat().st_mode & 0o777)}
        return [HealthStep("seen", 0.5, json.dumps(seen), {"result": "ok", "n": 1})]

    (step,) = isolated(layout, 2, gate)
    outside.close()
    seen = json.loads(step.detail)
    assert seen["current"] == "releases/2"
    assert seen["settings"] == {"policy": {"mode": "plan"}}
    assert seen["entries"] == ["bin", "current", "logs", "releases", "state", "store"]
    assert seen["bin"] == "../current/venv/bin/abhed"
    assert seen["interfaces"] == ["lo"] and seen["reached_outside"] is False
    assert seen["prefix_mode"] == "0o755"
    assert (step.seconds, step.audit) == (0.5, {"result": "ok", "n": 1})
    # outside: the host as it was, and what the gate wrote into the prefix's logs is kept
    assert (os.readlink(layout.current) if current else os.path.lexists(layout.current)) == \
        ("releases/1" if current else False)
    assert (layout.logs / "gate-2-model.log").read_text() == "written inside\n"
    assert not any(layout.prefix.glob(".current*"))


def test_a_refusal_an_error_and_a_crash_come_back_as_they_were(tmp_path: Path) -> None:
    layout = _prefix(tmp_path, 1)

    def refuse() -> list[HealthStep]:
        raise HealthCheckFailed("the known-answer prompt was answered 'six'")

    def step_failed() -> list[HealthStep]:
        raise StepFailed("cannot start")

    def crash() -> list[HealthStep]:
        raise ZeroDivisionError("boom")

    def killed() -> list[HealthStep]:
        os.kill(os.getpid(), 9)
        return []

    with pytest.raises(HealthCheckFailed, match="answered 'six'"):
        isolated(layout, 2, refuse)
    with pytest.raises(StepFailed, match="cannot start"):
        isolated(layout, 2, step_failed)
    with pytest.raises(StepFailed, match="ZeroDivisionError: boom"):
        isolated(layout, 2, crash)
    with pytest.raises(StepFailed, match="ended without a result"):
        isolated(layout, 2, killed)
    assert os.readlink(layout.current) == "releases/1"


def test_a_first_install_keeps_what_the_gate_writes_and_nothing_vanishes(tmp_path: Path) -> None:
    # A first install: the prefix holds only the release (no state/ or logs/ yet). The
    # probe's record once went to the tmpfs here and was lost with the namespace, so the
    # next upgrade ran a probe of minutes that the record would have let it skip.
    prefix = tmp_path / "opt-abhed"
    site = prefix / "releases/1/site"
    site.mkdir(parents=True)
    (site / "settings.json").write_text("{}")
    layout = Layout(prefix)

    def gate() -> list[HealthStep]:
        (layout.state_dir / "probe/1").mkdir(parents=True)
        (layout.state_dir / "probe/1/outcome.json").write_text('{"passed": false}')
        try:
            (prefix / "stray").write_text("lost?")
            stray = "written"
        except OSError as exc:
            stray = exc.strerror or "refused"
        return [HealthStep("seen", 0.1, stray, None)]

    (step,) = isolated(layout, 1, gate)
    assert (layout.state_dir / "probe/1/outcome.json").read_text() == '{"passed": false}'
    assert step.detail == "Read-only file system"  # a write outside the binds fails loudly
    assert not (prefix / "stray").exists()


def _echo(sock: socket.socket) -> None:
    """Serve ``sock``: each connection gets back what it sends."""
    def one(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    while True:
        conn, _ = sock.accept()
        threading.Thread(target=one, args=(conn,), daemon=True).start()


def _try(addr: tuple[str, int]) -> str:
    try:
        with socket.create_connection(addr, timeout=5) as c:
            c.sendall(b"ping")
            return "echo" if c.recv(16) == b"ping" else "no echo"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))


def _agent_gate_in_a_simulated_network(tmp_path: Path, model: str,
                                       elsewhere: str) -> dict[str, Any]:
    """In a network (and mount) namespace of the test's own, so nothing of the machine's is
    touched: a 'model host' at ``model`` (its service on P, another service on Q), a
    listener on loopback, and the name model-a.test for ``model``; then an agent host's
    gate that may reach http://model-a.test:P/v1 and nothing else."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.unshare(0x40000000 | 0x00020000) == 0  # CLONE_NEWNET | CLONE_NEWNS
    assert libc.mount(b"none", b"/", None, ctypes.c_ulong(16384 | (1 << 18)), None) == 0
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{model} model-a.test\n")
    assert libc.mount(str(hosts).encode(), b"/etc/hosts", None, ctypes.c_ulong(4096), None) == 0
    _loopback_up()
    add_address(model, 0)
    servers = {}
    for name, addr in (("service", model), ("other_port", model),
                       ("loopback", "127.0.0.1")):
        s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
        s.bind((addr, 0))
        s.listen()
        threading.Thread(target=_echo, args=(s,), daemon=True).start()
        servers[name] = (addr, s.getsockname()[1])
    layout = _prefix(tmp_path, 1)

    def gate() -> list[HealthStep]:
        seen = {name: _try(addr) for name, addr in servers.items()}
        seen["by_name"] = _try(("model-a.test", servers["service"][1]))
        seen["elsewhere"] = _try((elsewhere, servers["service"][1]))
        seen["interfaces"] = [n for _, n in socket.if_nameindex()]
        return [HealthStep("seen", 0.1, json.dumps(seen))]

    (step,) = isolated(layout, 2, gate,
                       endpoints=[f"http://model-a.test:{servers['service'][1]}/v1"])
    outside = {"hosts_after": Path("/etc/hosts").read_text()}
    return {**json.loads(step.detail), **outside}


@pytest.mark.parametrize(("model", "elsewhere"), [("10.77.0.1", "10.77.0.2"),
                                                 ("fd77::1", "fd77::2")], ids=["ipv4", "ipv6"])
def test_an_agent_hosts_gate_reaches_the_declared_model_endpoint_and_nothing_else(
        tmp_path: Path, model: str, elsewhere: str) -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            try:
                result: dict[str, Any] = _agent_gate_in_a_simulated_network(
                    tmp_path, model, elsewhere)
            except BaseException as exc:
                result = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(write, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        seen = json.loads(f.read())
    os.waitpid(pid, 0)
    assert "error" not in seen, seen["error"] if "error" in seen else ""
    assert seen["service"] == "echo" and seen["by_name"] == "echo"  # the declared endpoint
    assert seen["other_port"] == "ECONNREFUSED"  # the model host's other services: no
    assert seen["loopback"] == "ECONNREFUSED"  # the host's own loopback: no
    assert seen["elsewhere"] == "ENETUNREACH"  # any other address: no route at all
    assert seen["interfaces"] == ["lo"]
    # the gate's private /etc/hosts was its own: the test namespace's is as it was
    assert seen["hosts_after"] == f"127.0.0.1 localhost\n{model} model-a.test\n"


def test_an_endpoint_that_does_not_resolve_is_refused_before_the_gate(tmp_path: Path) -> None:
    layout = _prefix(tmp_path, 1)
    with pytest.raises(StepFailed, match="does not resolve to an address"):
        isolated(layout, 2, lambda: [], endpoints=["http://no-such-host.invalid:8000/v1"])
