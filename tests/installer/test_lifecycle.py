"""One host's life with the built binary: install offline, upgrade, refuse a downgrade,
roll back, catch altered files, catch a tampered audit log, uninstall.

The steps share one prefix (each real install builds a venv of ~45 wheels, so they are
done once); each step asserts its own behaviour.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import BundleMaker, Installer, Keys

pytestmark = pytest.mark.slow

_LOOPBACK = re.compile(r'sin6?_addr=inet_(?:addr|pton)\((?:AF_INET6, )?"(127\.0\.0\.1|::1)"')


def _non_loopback_connects(trace: Path) -> list[str]:
    bad = []
    for line in trace.read_text().splitlines():
        if "connect(" not in line or "AF_UNIX" in line or "AF_NETLINK" in line:
            continue
        if "AF_INET" in line and _LOOPBACK.search(line):
            continue
        bad.append(line)
    return bad


@pytest.fixture(scope="module")
def host(installer_bin: list[str], tmp_path_factory: pytest.TempPathFactory) -> Installer:
    d = tmp_path_factory.mktemp("host")
    (d / "sysroot/etc").mkdir(parents=True)
    return Installer(installer_bin, d / "opt-abhed", d / "sysroot")


def test_1_install_offline_in_a_network_namespace(host: Installer, make_bundle: BundleMaker,
                                                   keys: Keys, tmp_path: Path) -> None:
    if not (shutil.which("unshare") and shutil.which("strace") and shutil.which("ip")):
        pytest.fail("unshare, strace and ip are needed (scripts/apt-packages.txt installs them)")
    trace = tmp_path / "connect.trace"
    argv = " ".join(host.argv) + (f" install {make_bundle(1)} --trust {keys.pub} "
                                  f"--prefix {host.prefix}")
    # A namespace with only loopback (brought up): any other connect() fails, and strace
    # records every attempt by the installer, pip, the model server and the agent.
    cmd = (f"ip link set lo up && exec strace -f -qq -e trace=connect -o {trace} {argv}")
    p = subprocess.run(["unshare", "-n", "sh", "-c", cmd], capture_output=True, text=True,
                       env=host.env, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "installed: release 1 is current" in p.stdout
    assert _non_loopback_connects(trace) == []
    assert "gate: agent tool call: ok" in p.stderr
    assert os.readlink(host.prefix / "current") == "releases/1"
    assert (host.prefix / "bin/abhed").resolve() == host.prefix / "releases/1/venv/bin/abhed"
    # No systemd in the fake root: a run script and a note, no unit.
    # pip ran from an unpacked, compiled copy of the bundle's pip: gone before the record.
    assert not (host.prefix / "releases/1/.pip").exists()
    assert not any(f.startswith(".pip/") for f in json.loads(
        (host.prefix / "releases/1/record.json").read_text())["files"])
    assert (host.prefix / "releases/1/run-model-server").stat().st_mode & 0o111
    assert not (host.sysroot / "etc/systemd").exists()
    assert "no systemd on this host" in p.stdout
    steps = [(e["step"], e["result"]) for e in host.audit()]
    assert ("gate", "ok") in steps and steps[-1] == ("done", "ok")
    # The model was checked by the standard OpenSSF verifier from the release's venv.
    assert ("model-signature", "ok") in steps
    assert "model tiny: OpenSSF model signature verified" in p.stderr
    assert steps.index(("gate", "ok")) < steps.index(("switch", "ok"))
    # The gate's model log starts with what it ran, from release 1's own venv.
    first = (host.prefix / "logs/gate-1-model.log").read_text().splitlines()[0]
    assert first.startswith(f"$ {host.prefix}/releases/1/venv/bin/python "), first


def test_2_the_installed_agent_runs_from_the_prefix(host: Installer) -> None:
    out = subprocess.run([str(host.prefix / "bin/abhed"), "--help"], capture_output=True,
                         text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                      "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0 and "tool" in out.stdout


def test_3_status_reports_releases_model_and_audit(host: Installer) -> None:
    r = host("status", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["current"] == 1 and s["name"] == "abhed-test"
    assert s["releases"][0]["model"] == "tiny"
    assert s["audit"]["ok"] and s["audit"]["entries"] >= 8
    assert s["service"]["systemd"] is False
    assert s["last_audit"][-1]["step"] == "done"


def test_4_check_is_clean_after_install(host: Installer) -> None:
    r = host("check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "match the record and the signed manifest" in r.stdout


def test_5_upgrade_reuses_unchanged_weights_by_hash(host: Installer, make_bundle: BundleMaker) -> None:
    r = host("upgrade", make_bundle(2))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "upgraded: release 2 is current" in r.stdout and "(was 1)" in r.stdout
    # weights, config, serve, script, catalog, and the model signature with its key
    assert "reused 7 unchanged model file(s)" in r.stderr
    w1 = host.prefix / "releases/1/bundle/models/tiny/weights.bin"
    w2 = host.prefix / "releases/2/bundle/models/tiny/weights.bin"
    assert w1.stat().st_ino == w2.stat().st_ino  # one copy on disk
    assert host("check").returncode == 0


def test_6_an_older_bundle_is_refused_and_recorded(host: Installer, make_bundle: BundleMaker) -> None:
    r = host("upgrade", make_bundle(1))
    assert r.returncode == 5, r.stdout + r.stderr
    assert "--allow-downgrade" in r.stderr
    assert host.audit()[-1]["result"] == "refused"
    assert os.readlink(host.prefix / "current") == "releases/2"
    # verify sees the host's installed version too
    assert host("verify", make_bundle(1)).returncode == 5
    r = host("verify", make_bundle(1), "--allow-downgrade")
    assert r.returncode == 0 and "older than installed" in r.stdout


def test_7_a_tampered_bundle_is_refused_with_the_pinned_key(host: Installer, make_bundle: BundleMaker,
                                                            keys: Keys, tmp_path: Path) -> None:
    data = bytearray(make_bundle(3).read_bytes())
    data[-20000] ^= 0xFF
    bad = tmp_path / "bad.abhed"
    bad.write_bytes(bytes(data))
    before = sorted(os.listdir(host.prefix / "releases"))
    r = host("upgrade", bad)
    assert r.returncode == 3, r.stdout + r.stderr
    assert sorted(os.listdir(host.prefix / "releases")) == before
    # The pinned key cannot be swapped from the command line.
    r = host("upgrade", make_bundle(3, key=keys.other_secret), "--trust", keys.other_pub)
    assert r.returncode == 3 and "pins key" in r.stderr


def test_8_rollback_is_gated_and_switches_back(host: Installer) -> None:
    r = host("rollback")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "release 1 is current" in r.stdout
    assert os.readlink(host.prefix / "current") == "releases/1"
    s = json.loads(host("status", "--json").stdout)
    assert (s["current"], s["previous"], s["highest"]) == (1, 2, 2)
    assert [e["step"] for e in host.audit() if e["action"] == "rollback"][-3:] == \
        ["gate", "switch", "done"]


def test_9_check_lists_added_missing_and_altered_files(host: Installer) -> None:
    rel = host.prefix / "releases/1"
    site = next((rel / "venv/lib").glob("python3*/site-packages"))
    target = site / "click" / "core.py"
    target.write_text(target.read_text() + "\n# altered\n")
    (site / "click" / "__init__.py").unlink()
    (rel / "venv/bin/dropped-in").write_text("#!/bin/sh\n")
    os.chmod(rel / "run-model-server", 0o777)
    r = host("check", "--json")
    assert r.returncode == 8, r.stderr
    rep = json.loads(r.stdout)
    assert rep["added"] == ["venv/bin/dropped-in"]
    assert rep["missing"] == [str((site / "click/__init__.py").relative_to(rel))]
    altered = {a["path"]: a["why"] for a in rep["altered"]}
    assert "sha256" in altered[str(target.relative_to(rel))]
    assert "mode 0o777" in altered["run-model-server"]
    r = host("check")
    assert "added    venv/bin/dropped-in" in r.stdout and "missing  " in r.stdout
    # the other release is untouched
    assert host("check", "--release", "2").returncode == 0
    # an edited record is caught through the audit log
    rec = rel / "record.json"
    os.chmod(rec, 0o644)
    body = json.loads(rec.read_text())
    body["files"]["venv/bin/dropped-in"] = {"type": "file", "sha256": "0" * 64, "size": 10}
    rec.write_text(json.dumps(body))
    r = host("check", "--json")
    assert r.returncode == 8
    assert any("edited" in p for p in json.loads(r.stdout)["problems"])


def test_10_audit_verify_then_tamper_is_detected(host: Installer, tmp_path: Path) -> None:
    r = host("audit", "verify", "--json")
    assert r.returncode == 0, r.stderr
    n = json.loads(r.stdout)["entries"]
    log = host.prefix / "audit/audit.log"
    original = log.read_bytes()
    lines = original.decode().splitlines()
    entry = json.loads(lines[2])
    entry["result"] = "ok" if entry["result"] != "ok" else "failed"
    lines[2] = json.dumps(entry, sort_keys=True, separators=(",", ":"))
    log.write_text("\n".join(lines) + "\n")
    r = host("audit", "verify")
    assert r.returncode == 9 and "line 3" in r.stderr
    log.write_text("\n".join(original.decode().splitlines()[:-2]) + "\n")  # cut the tail
    r = host("audit", "verify")
    assert r.returncode == 9 and "cut off the end" in r.stderr
    log.write_bytes(original)
    assert json.loads(host("audit", "verify", "--json").stdout)["entries"] == n


def test_11_uninstall_keep_data_then_everything(host: Installer) -> None:
    (host.prefix / "data").mkdir(exist_ok=True)
    (host.prefix / "data/sessions.db").write_text("keep me")
    r = host("uninstall", "--keep-data")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(host.prefix)) == [".lock", "audit", "data"]
    assert (host.prefix / "data/sessions.db").read_text() == "keep me"
    assert host("status").returncode == 0  # the audit trail still answers
    assert host("audit", "verify").returncode == 0
    assert host.audit()[-1]["action"] == "uninstall"


def test_12_uninstall_without_keep_data(host: Installer, make_bundle: BundleMaker,
                                        keys: Keys) -> None:
    # The prefix's pinned keys went with the state: the key is needed again.
    r = host("install", make_bundle(2), "--trust", keys.pub, "--skip-gate")
    assert r.returncode == 0, r.stdout + r.stderr
    assert any(e["step"] == "gate" and e["result"] == "skipped" for e in host.audit())
    r = host("uninstall", "--yes")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(host.prefix)) == [".lock", "audit"]
    assert host("audit", "verify").returncode == 0
