"""The built binary's surface: help, usage errors, verify and preflight (nothing is written)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from installer._preflight import kvm_probe

from .conftest import BundleMaker, Installer, Keys


def test_help_lists_every_verb_and_the_exit_codes(inst: Installer) -> None:
    r = inst("--help")
    assert r.returncode == 0
    for verb in ("verify", "preflight", "install", "upgrade", "rollback", "status", "check",
                 "uninstall", "audit"):
        assert verb in r.stdout
    assert "7 health gate failed" in r.stdout


def test_no_verb_and_unknown_verb_are_usage_errors(inst: Installer) -> None:
    assert inst(prefix=False).returncode == 2
    r = inst("frobnicate", prefix=False)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_status_and_check_on_an_empty_prefix_say_nothing_is_installed(inst: Installer) -> None:
    r = inst("status")
    assert r.returncode == 11 and "nothing is installed" in r.stderr
    assert inst("check").returncode == 11
    assert inst("rollback").returncode == 2  # the prefix does not even exist
    assert not inst.prefix.exists()


def test_verify_a_good_bundle_with_the_publisher_key(inst: Installer, make_bundle: BundleMaker,
                                                     keys: Keys) -> None:
    r = inst("verify", make_bundle(1), "--trust", keys.pub, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert (info["name"], info["version"], info["pinned_keys"]) == ("abhed-test", 1, False)
    assert info["signers"] == [keys.secret.public_key().id_hex]
    assert not inst.prefix.exists()  # verify writes nothing


def test_verify_refuses_a_bundle_signed_by_another_key(inst: Installer, make_bundle: BundleMaker,
                                                       keys: Keys) -> None:
    r = inst("verify", make_bundle(1, key=keys.other_secret), "--trust", keys.pub)
    assert r.returncode == 3
    assert "not trusted" in r.stderr or "not signed" in r.stderr


def test_verify_refuses_a_tampered_payload_byte(inst: Installer, make_bundle: BundleMaker,
                                                keys: Keys, tmp_path: Path) -> None:
    data = bytearray(make_bundle(1).read_bytes())
    data[len(data) // 2] ^= 0x01
    bad = tmp_path / "tampered.abhed"
    bad.write_bytes(bytes(data))
    r = inst("verify", bad, "--trust", keys.pub)
    assert r.returncode == 3, r.stderr
    assert "sha256" in r.stderr and "get a fresh copy" in r.stderr, r.stderr


@pytest.mark.parametrize("content", [b"", b"not a bundle at all\n" * 100, b"\0" * 4096,
                                     b"\xff" * 70000],
                         # short ids: pytest puts the id in PYTEST_CURRENT_TEST, and a
                         # 280 KB escaped id makes the installer's exec fail with E2BIG
                         ids=["empty", "text", "zeros", "70k-ff"])
def test_verify_refuses_hostile_files(inst: Installer, keys: Keys, tmp_path: Path,
                                      content: bytes) -> None:
    bad = tmp_path / "hostile.abhed"
    bad.write_bytes(content)
    r = inst("verify", bad, "--trust", keys.pub)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr


def test_verify_of_a_directory_or_missing_file_is_refused(inst: Installer, keys: Keys,
                                                          tmp_path: Path) -> None:
    assert inst("verify", tmp_path, "--trust", keys.pub).returncode == 3
    assert inst("verify", tmp_path / "absent.abhed", "--trust", keys.pub).returncode == 3


def test_a_fifo_as_bundle_or_key_is_refused_at_once(inst: Installer, keys: Keys,
                                                    make_bundle: BundleMaker,
                                                    tmp_path: Path) -> None:
    # open() on a FIFO blocks until a writer comes; the installer must refuse, not wait.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for verb in ("verify", "preflight"):
        r = inst(verb, fifo, "--trust", keys.pub, timeout=60)
        assert r.returncode == 3 and "named pipe" in r.stderr, (verb, r.returncode, r.stderr)
    r = inst("verify", make_bundle(1), "--trust", fifo, timeout=60)
    assert r.returncode == 2 and "named pipe" in r.stderr, (r.returncode, r.stderr)


def test_verify_without_any_key_says_how_to_pass_one(inst: Installer, make_bundle: BundleMaker) -> None:
    r = inst("verify", make_bundle(1))
    assert r.returncode == 2 and "--trust" in r.stderr


def test_a_key_file_that_is_not_a_key_is_a_usage_error(inst: Installer, make_bundle: BundleMaker,
                                                       tmp_path: Path) -> None:
    junk = tmp_path / "junk.pub"
    junk.write_bytes(os.urandom(5000))
    r = inst("verify", make_bundle(1), "--trust", junk)
    assert r.returncode == 2 and "not a minisign public key" in r.stderr


def test_preflight_passes_on_this_host_and_writes_nothing(inst: Installer, make_bundle: BundleMaker,
                                                          keys: Keys) -> None:
    r = inst("preflight", make_bundle(1), "--trust", keys.pub, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["nvidia"]["status"] == "skip"  # cpu bundle
    assert checks["kvm"]["status"] == "skip"  # no microVM image in the test bundle
    assert checks["systemd"]["found"].startswith("absent")  # the fake root has none
    for name in ("os", "arch", "glibc", "python", "disk", "prefix"):
        assert checks[name]["status"] == "ok", checks[name]
    assert not inst.prefix.exists()


@pytest.mark.parametrize("platform,check,needle", [
    ({"glibc": "9.99"}, "glibc", "upgrade the OS"),
    ({"python": "3.99"}, "python", "python3.99"),
    ({"arch": "aarch64"}, "arch", "aarch64"),
])
def test_preflight_failures_say_found_needed_and_what_to_do(
        inst: Installer, make_bundle: BundleMaker, keys: Keys, platform: dict[str, str],
        check: str, needle: str) -> None:
    r = inst("preflight", make_bundle(1, platform=platform), "--trust", keys.pub)
    assert r.returncode == 4, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("  ") and f" {check} " in ln)
    assert line.strip().startswith("FAIL") and "found" in line and "needs" in line
    assert needle in r.stdout
    assert "do:" in r.stdout


def _fake_smi(tmp_path: Path, driver: str, cuda: str, mib: int) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    smi = d / "nvidia-smi"
    smi.write_text(f"""#!/bin/sh
case "$1" in
  --query-gpu=*) echo "NVIDIA H200, {driver}, {mib}";;
  *) echo "| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda} |";;
esac
""")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    return d


def test_preflight_checks_the_nvidia_driver_cuda_and_memory(
        inst: Installer, make_bundle: BundleMaker, keys: Keys, tmp_path: Path) -> None:
    gpu = make_bundle(1, platform={"accelerator": "nvidia", "nvidia_driver_min": "550.0",
                                   "cuda": "12.4"})
    path = f"{_fake_smi(tmp_path, '535.10', '12.2', 1024)}:{os.environ['PATH']}"
    r = inst("preflight", gpu, "--trust", keys.pub, "--json", env={"PATH": path})
    assert r.returncode == 4
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["nvidia_driver"]["status"] == "fail" and checks["nvidia_driver"]["found"] == "535.10"
    assert checks["cuda"]["status"] == "fail"
    # The test model is tiny: 1 GiB of GPU memory is plenty.
    assert checks["gpu_memory"]["status"] == "ok"


def test_preflight_without_nvidia_smi_fails_a_gpu_bundle(
        inst: Installer, make_bundle: BundleMaker, keys: Keys, tmp_path: Path) -> None:
    gpu = make_bundle(1, platform={"accelerator": "nvidia", "nvidia_driver_min": "550.0",
                                   "cuda": "12.4"})
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    pydir = str(Path(subprocess.run(["python3", "-c", "import sys; print(sys.executable)"],
                                    capture_output=True, text=True).stdout.strip()).parent)
    r = inst("preflight", gpu, "--trust", keys.pub, env={"PATH": f"{empty}:{pydir}"})
    assert r.returncode == 4 and "nvidia-smi not found" in r.stdout


def test_preflight_disk_check_on_a_small_tmpfs(inst: Installer, make_bundle: BundleMaker,
                                                keys: Keys, tmp_path: Path) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    cmd = (f"mount -t tmpfs -o size=4m tmpfs {mnt} && exec "
           + " ".join(inst.argv) + f" preflight {make_bundle(1)} --trust {keys.pub} "
           f"--prefix {mnt}/abhed --json")
    p = subprocess.run(["unshare", "-rm", "sh", "-c", cmd], capture_output=True, text=True,
                       env=inst.env, timeout=300)
    assert p.returncode == 4, p.stderr
    disk = next(c for c in json.loads(p.stdout)["checks"] if c["name"] == "disk")
    assert disk["status"] == "fail" and "free" in disk["fix"]


def test_kvm_probe_creates_a_vm_not_just_opens_a_file(tmp_path: Path) -> None:
    fake = tmp_path / "kvm"
    fake.write_bytes(b"")
    assert "not a KVM device" in (kvm_probe(fake) or "")
    assert "cannot open" in (kvm_probe(tmp_path / "absent") or "")
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert kvm_probe(Path("/dev/kvm")) is None


@pytest.mark.parametrize("body", ["[1, 2]", "\"text\"", "{not json", "",
                                  '{"name": "a", "served_name": "m", "name": "b"}',  # a duplicate
                                  '{"name": "a"}' + " " * (16 << 20)],  # over the cap
                         ids=["list", "string", "cut", "empty", "duplicate", "oversized"])
def test_status_reads_a_damaged_release_record_as_a_problem_never_a_crash(tmp_path: Path,
                                                                         body: str) -> None:
    from installer._layout import Layout
    from installer._verbs.status import _release_info

    layout = Layout(tmp_path)
    rel = layout.release(3)
    (rel / "bundle/models/m").mkdir(parents=True)
    (rel / "release.json").write_text(body)
    (rel / "bundle/models/m/abhed-serve.json").write_text(body)
    info = _release_info(layout, 3)
    assert info["problem"] == "release.json unreadable" and info["model"] is None


@pytest.mark.parametrize("body, says", [
    ('{"format": "abhed-installer-state/1", "current": 1, "current": 2}', "duplicate key 'current'"),
    ('{"format": "abhed-installer-state/1", "current": 1', "not valid JSON"),
    ('{"format": "abhed-installer-state/1"}' + " " * (16 << 20), "larger than"),
    ('{"format": "abhed-installer-state/0"}', "not an abhed-installer-state/1 file"),
    ('[]', "must be a JSON object"),
], ids=["duplicate", "cut", "oversized", "other format", "not an object"])
def test_the_installers_state_is_read_strictly(tmp_path: Path, body: str, says: str) -> None:
    """installed.json (and the CA's index and the engineers' list, by the same reader):
    damage is refused by where, with what to do, never half-read."""
    from installer._errors import StepFailed
    from installer._layout import Layout, State

    layout = Layout(tmp_path)
    assert State.load(layout) == State()  # none yet: nothing installed
    layout.state_dir.mkdir(parents=True)
    (layout.state_dir / "installed.json").write_text(body)
    with pytest.raises(StepFailed, match=says) as info:
        State.load(layout)
    assert "audit verify" in str(info.value)
