"""A failure injected at each step of an upgrade leaves the host as it was.

One prefix with release 1 installed serves every test; each test snapshots the prefix
(everything but the audit log and step logs), fails an upgrade to release 2 at one step,
and asserts the snapshot is unchanged, ``current`` still points at release 1 and the audit
log records the restore.  Faults come from ``ABHED_INSTALLER_FAULT`` (an injected OSError,
a signal to itself, or SIGKILL), from real broken inputs (a wheel missing from the bundle,
a model that answers wrong), from a real SIGINT while pip runs, and from a tmpfs that
fills up under pip.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from .conftest import BundleMaker, Installer, Keys, installed_host, tree_snapshot

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def host(installer_bin: list[str], tmp_path_factory: pytest.TempPathFactory,
         make_bundle: BundleMaker, keys: Keys) -> Installer:
    return installed_host(installer_bin, tmp_path_factory.mktemp("failhost"), make_bundle, keys)


def _snap(host: Installer) -> dict[str, str]:
    return {k: v for k, v in tree_snapshot(host.prefix).items()
            if not k.startswith(("audit", "logs"))}


def _assert_untouched(host: Installer, before: dict[str, str]) -> None:
    assert _snap(host) == before
    assert os.readlink(host.prefix / "current") == "releases/1"
    assert not (host.prefix / "releases/2").exists()


@pytest.mark.parametrize("fault,code", [
    ("verified", 6), ("staged", 6), ("venv", 6), ("staged:sigterm", 143),
    ("staged:sigint", 130),
])
def test_fault_before_the_venv_is_built(host: Installer, make_bundle: BundleMaker, fault: str,
                                        code: int) -> None:
    before = _snap(host)
    r = host("upgrade", make_bundle(2), fault=fault)
    assert r.returncode == code, r.stdout + r.stderr
    _assert_untouched(host, before)
    last = host.audit()[-1]
    assert (last["step"], last["result"]) == ("restore", "ok")
    assert "removed releases/2" in last["undone"]


def test_pip_failure_from_a_wheel_missing_in_the_bundle(host: Installer,
                                                        make_bundle: BundleMaker) -> None:
    before = _snap(host)
    r = host("upgrade", make_bundle(2, drop_wheels=("click-",)))
    assert r.returncode == 6, r.stdout + r.stderr
    assert "pip could not install" in r.stderr and "Log:" in r.stderr
    _assert_untouched(host, before)


def test_sigint_while_pip_runs(host: Installer, make_bundle: BundleMaker) -> None:
    before = _snap(host)
    proc = host.popen("upgrade", make_bundle(2))
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "installing" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(seen) + err
    assert "every step taken was undone" in err
    _assert_untouched(host, before)
    # pip (in its own process group) is gone with it
    ps = subprocess.run(["pgrep", "-f", str(host.prefix / "releases/2")], capture_output=True)
    assert ps.returncode == 1


def test_gate_failure_keeps_the_previous_release(host: Installer, make_bundle: BundleMaker) -> None:
    before = _snap(host)
    r = host("upgrade", make_bundle(2, script=[{"text": "six"}]))
    assert r.returncode == 7, r.stdout + r.stderr
    assert "does not contain '5'" in r.stderr
    _assert_untouched(host, before)
    steps = [(e["step"], e["result"]) for e in host.audit()[-2:]]
    assert steps == [("gate", "failed"), ("restore", "ok")]


def test_failure_after_the_switch_switches_back(host: Installer, make_bundle: BundleMaker) -> None:
    before = _snap(host)
    r = host("upgrade", make_bundle(2), fault="switched")
    assert r.returncode == 6, r.stdout + r.stderr
    _assert_untouched(host, before)
    undone = host.audit()[-1]["undone"]
    assert undone[0] == "switched current back to 1" and undone[-1] == "removed releases/2"


def test_sigkill_in_the_middle_of_the_switch_is_recovered(host: Installer,
                                                           make_bundle: BundleMaker) -> None:
    before = _snap(host)
    r = host("upgrade", make_bundle(2), fault="switch:kill")
    assert r.returncode == -signal.SIGKILL
    # Power cut between making the new link and renaming it over `current`.
    assert os.readlink(host.prefix / "current") == "releases/1"
    assert list(host.prefix.glob(".current.*"))
    assert (host.prefix / "releases/2").exists() and not (host.prefix / "releases/2/.complete").exists()
    r = host("rollback", "--to", "1")  # any verb that takes the lock recovers first
    assert r.returncode == 0 and "nothing changed" in r.stdout
    _assert_untouched(host, before)
    assert not list(host.prefix.glob(".current.*"))
    assert any(e["step"] == "recover" for e in host.audit()[-3:])


def test_sigkill_after_the_switch_before_commit_is_switched_back(
        host: Installer, make_bundle: BundleMaker) -> None:
    before = _snap(host)
    r = host("upgrade", make_bundle(2), fault="state:kill")
    assert r.returncode == -signal.SIGKILL
    assert os.readlink(host.prefix / "current") == "releases/2"  # the switch had happened
    r = host("status", "--json")
    assert r.returncode == 0
    r = host("rollback", "--to", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.readlink(host.prefix / "current") == "releases/1"
    assert not (host.prefix / "releases/2").exists()
    after = _snap(host)
    # the state file is rewritten by recovery (same content) and the rest is as before
    assert {k: v for k, v in after.items() if "state" not in k} == \
        {k: v for k, v in before.items() if "state" not in k}


def test_disk_full_while_pip_runs(installer_bin: list[str], make_bundle: BundleMaker,
                                  keys: Keys, tmp_path: Path) -> None:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    err = tmp_path / "stderr"
    sysroot = tmp_path / "sysroot"
    (sysroot / "etc").mkdir(parents=True)
    # Large enough for preflight; once pip starts, shrink the tmpfs to what is used.
    script = f"""
mount -t tmpfs -o size=600m tmpfs {mnt}
{' '.join(installer_bin)} install {make_bundle(1)} --trust {keys.pub} --prefix {mnt}/abhed 2>{err} &
pid=$!
while ! grep -q installing {err}; do kill -0 $pid || break; sleep 0.1; done
used=$(df -k --output=used {mnt} | tail -1)
mount -o remount,size=$((used + 256))k {mnt}
wait $pid; rc=$?
echo "rc=$rc"
ls -A {mnt}/abhed/releases
test -e {mnt}/abhed/current && echo CURRENT-EXISTS
exit 0
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ABHED_INSTALLER")}
    env["ABHED_INSTALLER_SYSROOT"] = str(sysroot)
    p = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True,
                       env=env, timeout=900)
    stderr = err.read_text()
    assert "rc=6" in p.stdout, p.stdout + p.stderr + stderr
    assert "disk space" in stderr
    assert p.stdout.strip().splitlines()[-1] == "rc=6"  # releases/ empty, no current


@pytest.mark.parametrize("script,expect", [
    # The model answers without calling a tool: the run exits 0 but never saw the nonce.
    ([{"text": "5"}, {"text": "There is a PROBE file."}], "does not show the probe file's name"),
    # The model server fails mid-run: `abhed run` exits 4 and the gate quotes it.
    ([{"text": "5"}, {"status": 500, "error": "scripted breakage"}],
     "the agent probe exited with code 4"),
], ids=["no-tool-call", "server-error"])
def test_agent_probe_failures_keep_the_previous_release(
        host: Installer, make_bundle: BundleMaker, script: list[dict[str, object]],
        expect: str) -> None:
    before = _snap(host)
    r = host("upgrade", make_bundle(2, script=script))
    assert r.returncode == 7, r.stdout + r.stderr
    assert expect in r.stderr
    _assert_untouched(host, before)
    log = (host.prefix / "logs/gate-2-agent.log").read_text()
    assert '"type": "run_started"' in log  # it was the release's `abhed run`
