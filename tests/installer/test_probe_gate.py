"""The health gate's capability probe, through the built installer.

The bundles' model server is the probe's scripted model (``python -m
appliance.probe.scripted``) from the installed release: the good one passes
``abhed probe --quick``; a bad one (tool calls printed as text) is refused with
the probe's finding, nothing switched and the refusal in the audit log, unless
the operator passes ``--accept-probe-failure REASON`` (recorded).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import (
    BundleMaker,
    Installer,
    Keys,
    descriptor,
    installed_host,
    scripted_command,
    tree_snapshot,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def host(installer_bin: list[str], tmp_path_factory: pytest.TempPathFactory,
         make_bundle: BundleMaker, keys: Keys) -> Installer:
    return installed_host(installer_bin, tmp_path_factory.mktemp("probehost"), make_bundle, keys)


def _entries(host: Installer, version: int, step: str) -> list[dict[str, object]]:
    return [e for e in host.audit() if e.get("version") == version and e.get("step") == step]


def _snap(host: Installer) -> dict[str, str]:
    return {k: v for k, v in tree_snapshot(host.prefix).items() if not k.startswith(("audit", "logs"))}


def test_install_runs_the_probe_and_keeps_its_report_and_session(host: Installer) -> None:
    (probe,) = _entries(host, 1, "probe")
    assert probe["result"] == "ok" and probe["session"]
    kept = host.prefix / "state/probe/1"
    report = json.loads((kept / "report.json").read_text())
    assert report["passed"] is True and report["quick"] is True
    assert report["families"] == ["wire", "recovery"] and report["catalog_entry"] == "tiny"
    assert (kept / "events.db").stat().st_size > 0
    outcome = json.loads((kept / "outcome.json").read_text())
    assert outcome["passed"] is True and outcome["session"] == report["session_id"]
    (gate,) = [e for e in _entries(host, 1, "gate") if e["result"] == "ok"]
    assert "capability_probe" in [s["name"] for s in gate["steps"]]  # type: ignore[union-attr]


def test_a_model_that_prints_tool_calls_as_text_is_refused(host: Installer,
                                                            make_bundle: BundleMaker) -> None:
    before = _snap(host)
    bundle = make_bundle(2, serve=descriptor(command=scripted_command("text_calls")),
                         weights=b"a different model\n" * 1000)
    r = host("upgrade", bundle)
    assert r.returncode == 7, r.stdout + r.stderr
    assert "failed its capability probe" in r.stderr and "come back as text" in r.stderr
    assert "qwen3_coder" in r.stderr and "--accept-probe-failure" in r.stderr
    assert _snap(host) == before  # nothing switched, nothing left behind
    assert host.prefix.joinpath("current").resolve().name == "1"
    failed = [e for e in _entries(host, 2, "gate") if e["result"] == "failed"]
    assert failed and "come back as text" in str(failed[-1]["detail"])
    report = json.loads((host.prefix / "logs/gate-2-probe.json").read_text())
    assert report["passed"] is False


def test_accept_probe_failure_switches_and_records_the_reason(host: Installer,
                                                              make_bundle: BundleMaker) -> None:
    bundle = make_bundle(2, serve=descriptor(command=scripted_command("text_calls")),
                         weights=b"a different model\n" * 1000)
    r = host("upgrade", bundle, "--accept-probe-failure", "vendor fix due; approved by J. Doe")
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.prefix.joinpath("current").resolve().name == "2"
    (probe,) = _entries(host, 2, "probe")
    assert probe["result"] == "failure-accepted"
    assert probe["reason"] == "vendor fix due; approved by J. Doe"
    assert "come back as text" in str(probe["problem"])


def test_an_upgrade_with_the_same_model_skips_the_probe_recorded(host: Installer,
                                                                 make_bundle: BundleMaker) -> None:
    r = host("rollback", "--to", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    (skipped,) = _entries(host, 1, "probe")[-1:]
    assert skipped["result"] == "skipped" and skipped["passed_as"] == 1
    r = host("upgrade", make_bundle(3))
    assert r.returncode == 0, r.stdout + r.stderr
    (probe,) = _entries(host, 3, "probe")
    assert probe["result"] == "skipped" and probe["passed_as"] == 1
    # Release 1's record is release 3's too: the next upgrade's baseline, a rollback's record.
    kept = host.prefix / "state/probe/3"
    assert json.loads((kept / "outcome.json").read_text())["passed"] is True
    assert (kept / "report.json").read_bytes() == \
        (host.prefix / "state/probe/1/report.json").read_bytes()


@pytest.mark.parametrize("reason", ["", "   ", "line\nbreak", "x" * 2001])
def test_accept_probe_failure_needs_a_real_reason(host: Installer, make_bundle: BundleMaker,
                                                  reason: str) -> None:
    r = host("upgrade", make_bundle(4), "--accept-probe-failure", reason)
    assert r.returncode == 2
    assert "reason" in r.stderr


def test_the_bar_ships_in_the_bundle(host: Installer, make_bundle: BundleMaker, tmp_path: Path) -> None:
    # A bar the scripted model cannot meet in its bundle's catalog entry: the site's bar rules.
    strict = {"quick_families": ["wire", "recovery"], "min_rate": {"recovery": 1.0, "wire": 1.0},
              "note": "a site that tightened its bar"}
    bundle = make_bundle(5, serve=descriptor(command=scripted_command("no_tools")), bar=strict,
                         weights=b"yet another model\n" * 1000)
    r = host("upgrade", bundle)
    assert r.returncode == 7
    assert "below the bar of 100%" in r.stderr


def test_an_accepted_failure_is_not_proved_again_for_the_same_model(
        host: Installer, make_bundle: BundleMaker) -> None:
    bad = {"serve": descriptor(command=scripted_command("text_calls")),
           "weights": b"a different model\n" * 1000}
    reason = "demo model on a CPU host; approved by J. Doe"
    assert host("upgrade", make_bundle(6, **bad), "--accept-probe-failure", reason).returncode == 0
    (first,) = _entries(host, 6, "probe")
    assert first["result"] == "failure-accepted" and "come back as text" in str(first["problem"])
    # The same model and serving stack again, accepted again: recorded, not re-run.
    r = host("upgrade", make_bundle(7, **bad), "--accept-probe-failure", reason)
    assert r.returncode == 0, r.stdout + r.stderr
    (again,) = _entries(host, 7, "probe")
    assert again["result"] == "failure-accepted" and again["failed_as"] == 6
    assert again["reason"] == reason and "not re-run" in r.stderr
    assert not (host.prefix / "state/probe/7/report.json").exists()
    # Back to 6: its own accepted outcome stands.
    r = host("rollback")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _entries(host, 6, "probe")[-1]["accepted_as"] == 6
    # Without the operator's word the probe runs again, and refuses.
    r = host("upgrade", make_bundle(8, **bad))
    assert r.returncode == 7 and "failed its capability probe" in r.stderr
    assert host.prefix.joinpath("current").resolve().name == "6"
