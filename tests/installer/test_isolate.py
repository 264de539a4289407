"""The gate's private namespaces (installer._isolate), in-process: inside, ``current`` is the
release being gated and only loopback exists; outside, nothing changed; refusals, errors
and results cross back intact.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from installer._errors import HealthCheckFailed, StepFailed
from installer._health import HealthStep
from installer._isolate import isolated
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
