"""Start-up of the microVM without booting one (issue 16): the per-host record of
which accelerator works, and the boot that starts when the session opens.

A fake guest stands in for QEMU; the real boots are in test_image.py (slow).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from appliance.sandbox import (
    MicroVM,
    SandboxSettings,
    SandboxUnavailable,
    VMImage,
    _accel,
    _microvm,
)


def _image(tmp_path: Path, key: str = "k1") -> VMImage:
    d = tmp_path / "image"
    d.mkdir(exist_ok=True)
    for name in ("vmlinuz", "initrd.img", "rootfs.ext4"):
        (d / name).write_bytes(b"x")
    (d / "manifest.json").write_text(json.dumps({"key": key}))
    return VMImage.load(d)


class FakeGuest:
    """Boots instantly (or when ``gate`` opens); KVM boots fail when ``kvm_fails``."""

    kvm_fails = True
    tcg_fails = False
    gate: threading.Event | None = None
    boots: list[str] = []

    def __init__(self, workspace: str, image: VMImage, settings: SandboxSettings, accel: str, *,
                 owned: bool = False, cancel: threading.Event | None = None) -> None:
        FakeGuest.boots.append(accel)
        self.accel = accel
        self.owned = owned
        self.stopped = threading.Event()
        self.qemu: Any = self
        self.hello: dict[str, Any] = {}
        self.boot_ms = 1.0
        if FakeGuest.gate is not None:
            deadline = time.monotonic() + 10
            while not FakeGuest.gate.wait(0.01):
                if cancel is not None and cancel.is_set():
                    raise SandboxUnavailable("the VM's boot was cancelled: the session closed")
                assert time.monotonic() < deadline
        if accel == "kvm" and FakeGuest.kvm_fails:
            raise SandboxUnavailable("the VM (kvm) did not reach its agent in time")
        if accel == "tcg" and FakeGuest.tcg_fails:
            raise SandboxUnavailable("the VM (tcg) stopped while booting")

    def poll(self) -> int | None:
        return 0 if self.stopped.is_set() else None

    def stop(self) -> None:
        self.stopped.set()

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        return {"exit_code": 0, "signal": None, "timed_out": False, "output_limited": False,
                "head_b64": "", "tail_b64": "", "output_bytes": 0, "duration_ms": 1.0,
                "cwd": None}

    def _log_tail(self, name: str) -> str:
        return ""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeGuest]:
    monkeypatch.setattr(_microvm, "_Guest", FakeGuest)
    monkeypatch.setattr(_microvm, "kvm_usable", lambda: True)
    monkeypatch.setattr(_microvm, "_ACCEL_CHOICE", {})
    FakeGuest.kvm_fails, FakeGuest.tcg_fails, FakeGuest.gate = True, False, None
    FakeGuest.boots = []
    return FakeGuest


def _new_process() -> None:
    _microvm._ACCEL_CHOICE.clear()  # what a fresh Abhed process starts with


def test_a_failed_kvm_probe_is_paid_once_per_host(fake: type[FakeGuest], tmp_path: Path) -> None:
    image = _image(tmp_path)
    MicroVM(str(tmp_path), image).boot()
    assert fake.boots == ["kvm", "tcg"]
    _new_process()
    MicroVM(str(tmp_path), image).boot()
    assert fake.boots == ["kvm", "tcg", "tcg"]  # the next session goes straight to TCG
    record = json.loads(_accel.state_path().read_text())
    assert [v["accel"] for v in record.values()] == ["tcg"]
    assert "did not reach its agent" in next(iter(record.values()))["reason"]


def test_a_new_image_or_qemu_probes_again(fake: type[FakeGuest], tmp_path: Path) -> None:
    MicroVM(str(tmp_path), _image(tmp_path, "k1")).boot()
    _new_process()
    fake.boots.clear()
    MicroVM(str(tmp_path), _image(tmp_path, "k2")).boot()
    assert fake.boots == ["kvm", "tcg"]
    key = _accel.probe_key("qemu-system-x86_64", tmp_path / "vmlinuz", {"key": "k"})
    qemu = tmp_path / "qemu"
    qemu.write_text("a")
    before = _accel.probe_key(str(qemu), tmp_path / "vmlinuz", {"key": "k"})
    os.utime(qemu, ns=(1, 1))
    assert _accel.probe_key(str(qemu), tmp_path / "vmlinuz", {"key": "k"}) != before != key


def test_a_failure_that_is_not_kvms_is_not_remembered(fake: type[FakeGuest], tmp_path: Path) -> None:
    fake.tcg_fails = True
    with pytest.raises(SandboxUnavailable):
        MicroVM(str(tmp_path), _image(tmp_path)).boot()
    assert not _accel.state_path().exists()


def test_explicit_accel_never_reads_or_writes_the_record(fake: type[FakeGuest], tmp_path: Path) -> None:
    MicroVM(str(tmp_path), _image(tmp_path), SandboxSettings(accel="tcg")).boot()
    assert fake.boots == ["tcg"] and not _accel.state_path().exists()


def test_working_kvm_is_recorded_and_still_used(fake: type[FakeGuest], tmp_path: Path) -> None:
    fake.kvm_fails = False
    image = _image(tmp_path)
    MicroVM(str(tmp_path), image).boot()
    _new_process()
    MicroVM(str(tmp_path), image).boot()
    assert fake.boots == ["kvm", "kvm"]


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"k": 3}', b'{"k": {"accel": "evil"}}',
                                     b"x" * (2 << 20), b"\xff\xfe"])
def test_a_corrupt_record_counts_as_empty(fake: type[FakeGuest], tmp_path: Path,
                                          content: bytes) -> None:
    path = _accel.state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    assert _accel.recall("k") is None
    MicroVM(str(tmp_path), _image(tmp_path)).boot()
    assert fake.boots == ["kvm", "tcg"]
    assert list(json.loads(path.read_text()).values())[0]["accel"] == "tcg"


def test_the_record_keeps_a_bounded_number_of_hosts(tmp_path: Path) -> None:
    for i in range(100):
        _accel.remember(f"key{i}", "tcg", "x" * 10_000)
    data = json.loads(_accel.state_path().read_text())
    assert len(data) == 64 and "key99" in data and "key0" not in data
    assert all(len(v["reason"]) <= 500 for v in data.values())


def test_an_unwritable_state_dir_only_costs_a_probe(fake: type[FakeGuest], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "home-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("ABHED_HOME", str(blocker))
    MicroVM(str(tmp_path), _image(tmp_path)).boot()
    assert fake.boots == ["kvm", "tcg"] and _accel.recall("anything") is None


def test_boot_in_background_serves_the_first_command(fake: type[FakeGuest], tmp_path: Path) -> None:
    fake.gate = threading.Event()
    vm = MicroVM(str(tmp_path), _image(tmp_path), SandboxSettings(accel="tcg"))
    vm.boot_in_background()
    vm.boot_in_background()  # idempotent while a boot runs
    assert vm._guest is None
    fake.gate.set()
    run = vm.run("true", cwd=str(tmp_path), env={}, timeout_s=5)
    assert run.exit_code == 0 and fake.boots == ["tcg"]
    guest = vm._guest
    assert isinstance(guest, FakeGuest) and guest.owned  # the boot thread holds PDEATHSIG
    vm.close()
    assert guest.stopped.is_set()


def test_a_failed_background_boot_is_reported_by_the_first_command(fake: type[FakeGuest],
                                                                   tmp_path: Path) -> None:
    fake.tcg_fails = True
    vm = MicroVM(str(tmp_path), _image(tmp_path), SandboxSettings(accel="tcg"))
    vm.boot_in_background()
    with pytest.raises(SandboxUnavailable, match="stopped while booting"):
        vm.run("true", cwd=str(tmp_path), env={}, timeout_s=5)
    fake.tcg_fails = False
    assert vm.run("true", cwd=str(tmp_path), env={}, timeout_s=5).exit_code == 0  # boots again


def test_closing_during_a_background_boot_cancels_it(fake: type[FakeGuest], tmp_path: Path) -> None:
    fake.gate = threading.Event()  # never opens: only the cancel ends this boot
    vm = MicroVM(str(tmp_path), _image(tmp_path), SandboxSettings(accel="tcg"))
    vm.boot_in_background()
    started = time.monotonic()
    vm.close()
    assert time.monotonic() - started < 5 and vm._guest is None
    fake.gate.set()
    assert vm.run("true", cwd=str(tmp_path), env={}, timeout_s=5).exit_code == 0  # usable again
    vm.close()


def test_open_sandbox_starts_the_boot_unless_told_not_to(fake: type[FakeGuest], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from appliance.sandbox import open_sandbox

    image = _image(tmp_path)
    calls: list[MicroVM] = []
    monkeypatch.setattr(MicroVM, "boot_in_background", lambda self: calls.append(self))
    box = open_sandbox(tmp_path, SandboxSettings(backend="microvm", image_dir=str(image.dir)))
    assert calls == [box.sandbox]  # the session's first shell, over the booting VM
    open_sandbox(tmp_path, SandboxSettings(backend="microvm", image_dir=str(image.dir),
                                           boot_at_open=False))
    assert calls == [box.sandbox]


def test_sandbox_check_says_why_kvm_was_not_used(fake: type[FakeGuest], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The bug: `abhed sandbox check` said "booted with tcg" on a host with /dev/kvm, and the
    # reason KVM was not used was only in ABHED_HOME/state/sandbox-accel.json.
    from appliance.sandbox import check_backends

    image = _image(tmp_path)
    settings = SandboxSettings(image_dir=str(image.dir))

    def microvm_reason(given: SandboxSettings = settings) -> str:
        report = check_backends(given)[0]
        assert report.backend == "microvm" and report.ok, report.reason
        assert report.detail["accel_why"] in report.reason
        return report.reason

    first = microvm_reason()
    assert first.startswith("booted with tcg (KVM not used: the KVM boot failed: the VM (kvm) "
                            "did not reach its agent in time (remembered in ")
    assert f"{_accel.state_path()}; delete that file to try KVM again" in first
    _new_process()
    later = microvm_reason()  # straight to TCG: the reason comes from the record
    assert fake.boots == ["kvm", "tcg", "tcg"]
    assert ("KVM not used: KVM failed to boot this image on this host before (the VM (kvm) "
            "did not reach its agent in time)") in later
    assert str(_accel.state_path()) in later
    _new_process()
    monkeypatch.setattr(_microvm, "kvm_usable", lambda: False)
    assert "KVM not used: " in microvm_reason() and "/dev/kvm" in microvm_reason()
    assert microvm_reason(settings.model_copy(update={"accel": "tcg"})).endswith(
        '(KVM not used: sandbox.accel is "tcg")')
    fake.kvm_fails = False
    _new_process()
    _accel.state_path().unlink()
    monkeypatch.setattr(_microvm, "kvm_usable", lambda: True)
    assert microvm_reason() == "booted with kvm"
