"""Both service code paths, by pointing the systemd detector at a fake root (source-level:
the binary's path through them is covered by the lifecycle tests, which have no systemd)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from installer._layout import Layout
from installer._services import (
    PORT_MARK,
    render_run_script,
    systemctl,
    systemd_present,
    unit_path,
    write_unit,
)


def test_no_systemd_in_the_fake_root_means_no_unit(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ABHED_INSTALLER_SYSROOT", str(tmp_path))
    assert systemd_present() is False
    assert systemctl("daemon-reload") is None


def test_systemd_in_the_fake_root_gets_a_unit_and_systemctl_is_never_called(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    monkeypatch.setenv("ABHED_INSTALLER_SYSROOT", str(tmp_path))
    assert systemd_present() is True
    layout = Layout(Path("/opt/abhed"))
    path, old = write_unit(layout)
    assert old is None and path == unit_path() == tmp_path / "etc/systemd/system/abhed-model.service"
    text = path.read_text()
    assert "ExecStart=/opt/abhed/current/run-model-server" in text
    assert "IPAddressDeny=any" in text and "Environment=ABHED_HOME=/opt/abhed/data" in text
    assert systemctl("daemon-reload") is None  # a fake root is never driven
    path2, old2 = write_unit(layout)
    assert old2 == text.encode()


def test_run_script_quotes_hostile_arguments_and_takes_the_port_from_the_environment(
        tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    argv = ["/bin/echo", f"$(touch {marker})", "a b;c", f"--port={PORT_MARK}", PORT_MARK]
    script = tmp_path / "run"
    script.write_text(render_run_script(3, argv, {"X": "'quoted'"}, Layout(tmp_path)))
    out = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True,
                         env={"ABHED_MODEL_PORT": "9123", "PATH": "/usr/bin:/bin"}).stdout
    assert out == f"$(touch {marker}) a b;c --port=9123 9123\n"
    assert not marker.exists()


@pytest.mark.parametrize(("role", "names"), [
    ("agent", {"abhed-model-relay.service"}),
    ("model", {"abhed-model.service", "abhed-model-front.service"}),
    ("all", {"abhed-model.service", "abhed-model-front.service", "abhed-model-relay.service"}),
])
def test_each_role_gets_its_units_and_the_relay_reaches_the_declared_endpoints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str, names: set[str]) -> None:
    from installer._services import relay_upstreams, write_units

    (tmp_path / "run/systemd/system").mkdir(parents=True)
    monkeypatch.setenv("ABHED_INSTALLER_SYSROOT", str(tmp_path))
    layout = Layout(Path("/opt/abhed"))
    endpoints = ("https://model-1:8443/v1", "https://model-2:8443/")
    written = write_units(layout, role, endpoints)
    assert {p.name for p, _ in written} == names
    assert all(old is None for _, old in written)
    relay = tmp_path / "etc/systemd/system/abhed-model-relay.service"
    if "abhed-model-relay.service" in names:
        text = relay.read_text()
        assert "--upstream https://model-1:8443 --upstream https://model-2:8443" in text
        assert "--socket /run/abhed/model.sock" in text
        assert "/opt/abhed/state/credential/host.pem" in text
    else:
        assert not relay.exists()
    again = write_units(layout, role, endpoints)
    assert all(old is not None for _, old in again)
    assert relay_upstreams(()) == ["https://localhost:8443"]


@pytest.mark.parametrize(("role", "restarted"), [
    ("agent", ["abhed-model-relay.service"]),
    ("model", ["abhed-model-front.service"]),
    ("all", ["abhed-model-relay.service", "abhed-model-front.service"]),
])
def test_after_a_switch_the_running_relay_and_front_run_the_new_release(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str,
        restarted: list[str]) -> None:
    """Upgrade and rollback end in post_switch: the role's relay and front that are running
    are restarted (their units start PREFIX/bin/abhed, which follows current), so they run
    the new release's code; a fake root never drives systemctl (the tests above), so the
    calls are recorded here in its place."""
    import json

    import installer._services as services
    from installer._audit import AuditLog
    from installer._steps import post_switch

    calls: list[tuple[str, ...]] = []

    def fake(*args: str) -> str | None:
        calls.append(args)
        return "inactive" if args[0] == "is-active" and args[1] == "abhed-model.service" \
            else "active"

    monkeypatch.setattr(services, "systemctl", fake)
    layout = Layout(tmp_path / "opt")
    layout.release(2).mkdir(parents=True)
    (layout.release(2) / "release.json").write_text(json.dumps({"role": role}))
    audit = AuditLog(tmp_path / "audit")
    post_switch(layout, audit, "rollback", "r1", 2)
    assert [c[1] for c in calls if c[0] == "try-restart"] == restarted
    entries = [e for _, e in audit.entries() if e["step"] == "restart"]
    assert [(e["action"], e["unit"], e["result"]) for e in entries] == [
        ("rollback", u, "ok") for u in restarted]
