"""What ``abhed sandbox check`` reports: which backends work here, why not, how fast."""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from appliance.sandbox import _accel
from appliance.sandbox._errors import SandboxError
from appliance.sandbox._local import BwrapSandbox, HostSandbox, bwrap_problem
from appliance.sandbox._microvm import MicroVM, VMImage, kvm_unusable_reason, remembered_tcg_reason
from appliance.sandbox._open import image_dir
from appliance.sandbox._settings import SandboxSettings

__all__ = ["BackendReport", "check_backends", "kvm_status"]


@dataclass
class BackendReport:
    """One backend's verdict on this host."""

    backend: str
    ok: bool
    reason: str
    boot_ms: float | None = None
    command_ms: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _time_commands(box: Any, ws: str, n: int = 3) -> tuple[float, str]:
    best = float("inf")
    out = ""
    for _ in range(n):
        t = time.perf_counter()
        run = box.run("uname -r", cwd=ws, env={}, timeout_s=60)
        best = min(best, (time.perf_counter() - t) * 1000)
        out = run.head.decode(errors="replace").strip()
    return round(best, 1), out


def _check_microvm(settings: SandboxSettings, ws: str, boot: bool) -> BackendReport:
    try:
        image = VMImage.load(image_dir(settings))
    except SandboxError as exc:
        return BackendReport("microvm", False, str(exc))
    if not boot:
        return BackendReport("microvm", True, "image present (not booted: --no-boot)")
    vm = MicroVM(ws, image, settings)
    try:
        vm.boot()
        ms, kernel = _time_commands(vm, ws)
        why = f" (KVM not used: {vm.accel_why})" if vm.accel != "kvm" and vm.accel_why else ""
        return BackendReport("microvm", True, f"booted with {vm.accel}{why}", vm.boot_ms, ms,
                             {"accel": vm.accel, "accel_why": vm.accel_why,
                              "guest_kernel": kernel})
    except SandboxError as exc:
        return BackendReport("microvm", False, str(exc))
    finally:
        vm.close()


def _check_bwrap(settings: SandboxSettings, ws: str) -> BackendReport:
    problem = bwrap_problem()
    if problem:
        return BackendReport("bwrap", False, problem)
    t = time.perf_counter()
    box = BwrapSandbox(ws, settings)
    try:
        setup = round((time.perf_counter() - t) * 1000, 1)
        ms, kernel = _time_commands(box, ws)
        return BackendReport("bwrap", True, "user namespace, no capabilities, Landlock, seccomp",
                             setup, ms, {"kernel": kernel})
    finally:
        box.close()


def kvm_status(settings: SandboxSettings | None = None) -> tuple[bool, str]:
    """Whether the microVM will boot with KVM here, and why not (software emulation then).

    Reads what a boot reads: the setting, ``/dev/kvm``'s access, and the verdict a
    failed KVM boot left for this host, QEMU and image (``state/sandbox-accel.json``).
    """
    settings = settings or SandboxSettings()
    if settings.accel == "tcg":
        return False, "sandbox.accel is \"tcg\": software emulation, chosen in the settings"
    unusable = kvm_unusable_reason()
    if unusable is not None:
        return False, unusable
    try:
        image = VMImage.load(image_dir(settings))
    except SandboxError:
        return True, "/dev/kvm is usable (no image yet to boot with it)"
    key = _accel.probe_key(settings.qemu_binary, image.kernel, image.manifest)
    if _accel.recall(key) == "tcg":
        return False, remembered_tcg_reason(key)
    return True, "/dev/kvm is usable"


def check_backends(settings: SandboxSettings | None = None, *, boot: bool = True) -> list[BackendReport]:
    """Try every backend in a scratch workspace; never raises for a backend's failure."""
    settings = settings or SandboxSettings()
    with tempfile.TemporaryDirectory(prefix="abhed-check-") as ws:
        reports = [_check_microvm(settings, ws, boot), _check_bwrap(settings, ws)]
        host = HostSandbox(ws, settings)
        try:
            ms, kernel = _time_commands(host, ws)
        finally:
            host.close()
        explicit = settings.backend == "host"
        reports.append(BackendReport(
            "host", True, "selected: commands run UNSANDBOXED on this host" if explicit else
            "works, but only used when sandbox.backend is set to \"host\" (no isolation)",
            None, ms, {"kernel": kernel}))
    return reports
