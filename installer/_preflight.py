"""Preflight: does this host meet the bundle's platform?  Checked before anything is written.

Every check reports what it found, what is needed and, when it fails, what
to do.  The checks read the host (``ABHED_INSTALLER_SYSROOT`` moves the files
they read, for tests and chroots) and probe rather than trust existence:
``/dev/kvm`` is opened and asked to create a VM, the Python is run.

The platform comes from the signed manifest, so these checks run before
staging.  The model's own needs (its declared system packages and GPU
memory) are in the bundle's ``abhed-serve.json`` and are checked right after
verification unpacks it, still before a venv is built or anything is switched.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ._proc import child_env

if TYPE_CHECKING:
    from bundle import Manifest

    from ._descriptor import ServeDescriptor

__all__ = ["Check", "PythonFound", "descriptor_checks", "platform_checks", "sysroot"]

Status = Literal["ok", "fail", "warn", "skip"]
_KVM_GET_API_VERSION = 0xAE00
_KVM_CREATE_VM = 0xAE01
_VENV_FACTOR = 4  # an installed wheel takes about this many times its compressed size
_MARGIN = 64 << 20
_GIB = 1 << 30


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    found: str
    needed: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class PythonFound:
    executable: str
    version: str


def sysroot() -> Path:
    return Path(os.environ.get("ABHED_INSTALLER_SYSROOT") or "/")


def _ver(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:4])


def _os(manifest: Manifest) -> Check:
    found = platform.system().lower()
    need = manifest.platform.os
    return Check("os", "ok" if found == need else "fail", found, need,
                 "" if found == need else f"install on a {need} host")


def _arch(manifest: Manifest) -> Check:
    raw = os.uname().machine
    found = {"amd64": "x86_64", "arm64": "aarch64"}.get(raw, raw)
    need = manifest.platform.arch
    return Check("arch", "ok" if found == need else "fail", found, need,
                 "" if found == need else f"get the {found} build of this bundle from the "
                 "publisher; its wheels and images are for another CPU")


def _glibc(manifest: Manifest) -> Check:
    need = manifest.platform.glibc
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        found = ""
    if not found.startswith("glibc"):
        return Check("glibc", "fail", found or "no glibc (musl?)", f">= {need}",
                     "install on a glibc-based distribution (Debian 12, RHEL 9 or newer)")
    ok = _ver(found) >= _ver(need)
    return Check("glibc", "ok" if ok else "fail", found.split()[-1], f">= {need}",
                 "" if ok else f"upgrade the OS to one with glibc {need} or newer (Debian 12 "
                 "has 2.36), or get a bundle built for older hosts")


def interpreter_problem(executable: str) -> str | None:
    """Why ``executable`` cannot be every engineer's interpreter, or None.

    The release's venv runs this interpreter for every engineer on the host, and the
    site's settings bind only as long as it is the one the operator installed.  So every
    user must be able to run it (a Python under a 0700 home, such as a pyenv build in
    /root, works for root and fails for everyone else), and only root may change it or
    any directory above it (an engineer who could replace it could replace the code that
    enforces the site's policy).
    """
    real = Path(os.path.realpath(executable))
    for path in (real, *real.parents):
        try:
            st = path.stat()
        except OSError as exc:
            return f"{path}: {exc.strerror}"
        if st.st_uid != 0:
            return (f"{path} belongs to uid {st.st_uid}, not root: whoever owns it could replace "
                    "the interpreter that enforces the site's settings")
        if st.st_mode & 0o022 and not (path.is_dir() and st.st_mode & 0o1000):
            return (f"{path} is writable by others (mode {st.st_mode & 0o7777:04o}): they could "
                    "replace the interpreter that enforces the site's settings")
        if path != real and not st.st_mode & 0o001:
            return (f"{path} is not searchable by other users (mode {st.st_mode & 0o7777:04o}): "
                    "engineers could not run the installed abhed")
    if real.stat().st_mode & 0o005 != 0o005:
        return f"{real} cannot be run by other users (mode {real.stat().st_mode & 0o7777:04o})"
    return None


def _all_on_path(name: str) -> list[str]:
    """Each executable called ``name`` on PATH, in PATH's order (``shutil.which`` gives one)."""
    found: list[str] = []
    for d in (os.environ.get("PATH") or os.defpath).split(os.pathsep):
        exe = shutil.which(name, path=d) if d else None
        if exe is not None and exe not in found:
            found.append(exe)
    return found


def find_python(manifest: Manifest, explicit: str | None) -> tuple[Check, PythonFound | None]:
    need = manifest.platform.python
    names = [explicit] if explicit else [f"python{need}", "python3"]
    # Every match on PATH, not only the first: root's PATH often starts with a Python of
    # its own (a pyenv shim) that engineers cannot run, with the system's further on.
    candidates: list[str] = []
    tried: list[str] = []
    for wanted in names:
        assert wanted is not None
        found = [wanted] if "/" in wanted else _all_on_path(wanted)
        if not found:
            tried.append(f"{wanted}: not on PATH")
        candidates += [f for f in found if f not in candidates]
    for exe in candidates:
        try:
            out = subprocess.run(
                [exe, "-I", "-c", "import sys, venv, json; print(json.dumps([sys.implementation."
                 "name, '%d.%d' % sys.version_info[:2], sys.executable]))"],
                capture_output=True, text=True, timeout=60, env=child_env(), check=False)
            name, ver, real = json.loads(out.stdout.strip().splitlines()[-1])
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
            tried.append(f"{exe}: does not run, or has no venv module")
            continue
        if name != "cpython" or ver != need:
            tried.append(f"{exe}: {name} {ver}")
            continue
        problem = interpreter_problem(real)
        if problem is not None:
            tried.append(f"{exe}: {problem}")
            continue
        return Check("python", "ok", f"CPython {ver} ({real})", f"CPython {need}"), \
            PythonFound(executable=str(real), version=ver)
    return Check("python", "fail", "; ".join(tried) or "none", f"CPython {need} with venv",
                 f"install python{need} (Debian: apt-get install python{need} python{need}-venv "
                 "from your local mirror) or pass --python PATH to one that root owns and every "
                 "user can run"), None


def _nvidia(manifest: Manifest, gpu_need_gib: float) -> list[Check]:
    p = manifest.platform
    if p.accelerator == "cpu":
        return [Check("nvidia", "skip", "cpu bundle", "no GPU")]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [Check("nvidia", "fail", "nvidia-smi not found", f"NVIDIA driver >= "
                      f"{p.nvidia_driver_min}, CUDA {p.cuda}",
                      "install the NVIDIA driver (it provides nvidia-smi) and reboot")]
    try:
        q = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True,
                           timeout=60, env=child_env(), check=True).stdout
        head = subprocess.run([smi], capture_output=True, text=True, timeout=60,
                              env=child_env(), check=False).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return [Check("nvidia", "fail", f"nvidia-smi failed ({exc})", "a working driver",
                      "run nvidia-smi by hand; reload the driver or reboot")]
    gpus = [[c.strip() for c in line.split(",")] for line in q.strip().splitlines() if line.strip()]
    if not gpus:
        return [Check("nvidia", "fail", "no GPU listed by nvidia-smi", "at least one GPU",
                      "check that the GPU is seated and the driver loaded (dmesg)")]
    driver = gpus[0][1] if len(gpus[0]) > 1 else "?"
    checks = []
    need_driver = p.nvidia_driver_min or "0"
    ok = _ver(driver) >= _ver(need_driver)
    checks.append(Check("nvidia_driver", "ok" if ok else "fail", driver, f">= {need_driver}",
                        "" if ok else f"install NVIDIA driver {need_driver} or newer"))
    m = re.search(r"CUDA Version:\s*([\d.]+)", head)
    cuda = m.group(1) if m else "unknown"
    need_cuda = p.cuda or "0"
    ok = m is not None and _ver(cuda) >= _ver(need_cuda)
    checks.append(Check("cuda", "ok" if ok else "fail", cuda, f">= {need_cuda}",
                        "" if ok else f"install a driver that supports CUDA {need_cuda}"))
    total_mib = sum(float(g[2]) for g in gpus if len(g) > 2 and g[2].replace(".", "").isdigit())
    found_gib = total_mib / 1024
    ok = found_gib >= gpu_need_gib
    checks.append(Check("gpu_memory", "ok" if ok else "fail",
                        f"{found_gib:.1f} GiB on {len(gpus)} GPU(s) ({gpus[0][0]})",
                        f">= {gpu_need_gib:.1f} GiB",
                        "" if ok else "use a host with more GPU memory, or a bundle with a "
                        "smaller model"))
    return checks


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists():
        p = p.parent
    return p


def disk_need(manifest: Manifest) -> int:
    """Bytes the install needs at its peak: every member unpacked plus the venv.

    Weights already in the store are unpacked too (then replaced by links), so
    they count against the peak even though they are not kept twice.
    """
    unpacked = sum(m.content_size for m in manifest.members)
    wheels = sum(m.content_size for m in manifest.members if m.name.endswith(".whl"))
    return unpacked + _VENV_FACTOR * wheels + _MARGIN


def _disk(manifest: Manifest, prefix: Path) -> Check:
    need = disk_need(manifest)
    where = _existing_ancestor(prefix)
    free = shutil.disk_usage(where).free
    ok = free >= need
    return Check("disk", "ok" if ok else "fail", f"{free / _GIB:.2f} GiB free on {where}",
                 f">= {need / _GIB:.2f} GiB (unpacked bundle + venv)",
                 "" if ok else f"free {(need - free) / _GIB:.2f} GiB on {where}, or install "
                 "with --prefix on a larger disk")


def _writable(prefix: Path) -> Check:
    where = _existing_ancestor(prefix)
    ok = os.access(where, os.W_OK | os.X_OK)
    return Check("prefix", "ok" if ok else "fail", f"{where} {'writable' if ok else 'not writable'}",
                 f"write access to {prefix}",
                 "" if ok else "run as root (sudo), or choose --prefix in a directory you own")


def kvm_probe(dev: Path) -> str | None:
    """None if ``dev`` can create a VM; otherwise why not."""
    try:
        fd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return f"cannot open {dev} ({exc.strerror})"
    try:
        try:
            api = fcntl.ioctl(fd, _KVM_GET_API_VERSION, 0)
        except OSError as exc:
            return f"{dev} is not a KVM device ({exc.strerror})"
        if api != 12:
            return f"{dev} speaks KVM API {api}, not 12"
        try:
            vm = fcntl.ioctl(fd, _KVM_CREATE_VM, 0)
        except OSError as exc:
            hint = " (is another hypervisor holding VT-x?)" if exc.errno == errno.EBUSY else ""
            return f"{dev} cannot create a VM ({exc.strerror}){hint}"
        os.close(vm)
        return None
    finally:
        os.close(fd)


def _kvm(manifest: Manifest) -> Check:
    if not any(c.kind == "image" for c in manifest.components):
        return Check("kvm", "skip", "no microVM image in this bundle", "nothing")
    dev = sysroot() / "dev/kvm"
    why = kvm_probe(dev)
    if why is None:
        return Check("kvm", "ok", f"{dev} creates VMs", "a usable /dev/kvm")
    # Without KVM the sandbox still runs, under software emulation: slow but correct.
    status: Status = "fail" if manifest.platform.accelerator == "nvidia" else "warn"
    return Check("kvm", status, why, "a usable /dev/kvm",
                 "enable virtualization (VT-x/AMD-V) in the firmware, load kvm_intel or "
                 "kvm_amd, and add the service user to group kvm; without it the microVM "
                 "falls back to software emulation")


def _package_installed(name: str) -> bool | None:
    root = sysroot()
    admin = root / "var/lib/dpkg"
    dpkg = shutil.which("dpkg-query")
    if dpkg and admin.is_dir():
        out = subprocess.run([dpkg, f"--admindir={admin}", "-W", "-f=${Status}", name],
                             capture_output=True, text=True, env=child_env(), check=False)
        return out.returncode == 0 and out.stdout.strip().endswith("ok installed")
    rpm = shutil.which("rpm")
    if rpm:
        return subprocess.run([rpm, f"--root={root}", "-q", name], capture_output=True,
                              env=child_env(), check=False).returncode == 0
    return None


def _packages(names: Sequence[str]) -> list[Check]:
    checks = []
    for name in names:
        have = _package_installed(name)
        if have is None:
            checks.append(Check(f"package {name}", "warn", "no dpkg or rpm database to ask",
                                f"{name} installed", "check by hand that it is installed"))
        elif have:
            checks.append(Check(f"package {name}", "ok", "installed", "installed"))
        else:
            checks.append(Check(f"package {name}", "fail", "not installed", "installed",
                                f"install {name} from your local mirror (apt-get install "
                                f"{name})"))
    return checks


def required_packages(manifest: Manifest) -> list[str]:
    """System packages the release needs on the host, from what the bundle carries."""
    if any(c.kind == "image" for c in manifest.components):
        return ["qemu-system-x86" if manifest.platform.arch == "x86_64" else "qemu-system-arm"]
    return []


def weights_gib(manifest: Manifest) -> float:
    return sum(size for name, (_, size) in manifest.staged_files().items()
               if name.startswith("models/")) / _GIB


def _kept_weights(manifest: Manifest, prefix: Path) -> list[Check]:
    """A bundle that references weights instead of carrying them needs them in the store.

    Presence and size only (cheap); staging re-hashes each file before linking it.
    """
    if not manifest.references:
        return []
    from ._layout import Layout

    store = Layout(prefix.absolute()).store
    lacking = sorted((r for r in manifest.references
                      if not _same_size(store / r.content_sha256, r.content_size)),
                     key=lambda r: -r.content_size)  # the weights first, not the configs
    need = (f"{len(manifest.references)} model file(s) "
            f"({manifest.referenced_size / _GIB:.2f} GiB) kept from "
            + ", ".join(sorted({r.carried_by for r in manifest.references})))
    if not lacking:
        return [Check("kept_weights", "ok", f"all in {store}", need)]
    names = ", ".join(f"{r.name} (sha256 {r.content_sha256[:12]}...)" for r in lacking[:3])
    more = f" and {len(lacking) - 3} more" if len(lacking) > 3 else ""
    carriers = ", ".join(sorted({r.carried_by for r in lacking}))
    return [Check("kept_weights", "fail", f"{len(lacking)} missing from {store}: {names}{more}",
                  need, f"this bundle does not carry them: install {carriers} on this host "
                  "first (it carries them), or ask for a full bundle (gathered without "
                  "reuse_weights_from)")]


def _same_size(path: Path, size: int) -> bool:
    try:
        return path.is_file() and path.stat().st_size == size
    except OSError:
        return False


def platform_checks(manifest: Manifest, prefix: Path, *, python: str | None,
                    role: str = "all") -> tuple[list[Check], PythonFound | None]:
    """The checks that need only the signed manifest (run before anything is written).

    ``manifest`` is the bundle as ``role`` sees it (``Manifest.for_role``): the disk, kept
    weights, KVM and package checks count only what the role installs, and the GPU is
    checked only where the model is served (an agent host needs none)."""
    py_check, py = find_python(manifest, python)
    checks = [_os(manifest), _arch(manifest), _glibc(manifest), py_check]
    # vLLM needs the weights plus room for activations and KV cache on the GPUs.
    if role == "agent":
        checks.append(Check("nvidia", "skip", "role agent", "no GPU (the model hosts serve)"))
    else:
        checks += _nvidia(manifest, weights_gib(manifest) * 1.2)
    checks += [_writable(prefix), _disk(manifest, prefix), *_kept_weights(manifest, prefix),
               _kvm(manifest) if role != "model" else
               Check("kvm", "skip", "role model", "no microVM (engineers work on agent hosts)")]
    checks += _packages(required_packages(manifest))
    systemd = (sysroot() / "run/systemd/system").is_dir()
    checks.append(Check("systemd", "ok", "present: service units will be written" if systemd
                        else "absent: a run script will be written instead", "either"))
    return checks, py


def descriptor_checks(manifest: Manifest, descriptor: ServeDescriptor) -> list[Check]:
    """The model's declared needs, checked once its declaration is unpacked."""
    checks = _packages(descriptor.system_packages)
    if manifest.platform.accelerator == "nvidia" and descriptor.min_gpu_memory_gib:
        checks += [c for c in _nvidia(manifest, descriptor.min_gpu_memory_gib)
                   if c.name == "gpu_memory"]
    return checks
