"""The ``microvm`` backend: one QEMU guest per session, the workspace shared live.

The VM is started on first use (lazily) and stopped with the session:

* virtiofsd shares the workspace; the guest mounts it at the *same absolute
  path*, so paths in commands and in tool results agree;
* the root is the image's read-only ext4 with a throwaway tmpfs overlay;
* there is no network device at all (``-nic none``): the guest has ``lo`` only;
* the guest agent (``_agent.py``, PID 1 in the guest) listens on a
  virtio-serial port whose host end is a Unix socket (vsock is not available
  everywhere; virtio-serial is).

Acceleration: with ``accel = "auto"`` the first boot tries KVM on the
``microvm`` machine (virtio-mmio devices) and, if that boot does not reach the
agent, falls back to software emulation on ``q35`` (virtio-pci devices;
``microvm`` under TCG hangs in timer calibration).  The choice is a real boot,
not a look at ``/dev/kvm``, and is remembered for this process.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.sandbox._agent import PROTOCOL_VERSION
from appliance.sandbox._errors import SandboxCrashed, SandboxUnavailable
from appliance.sandbox._local import base_env, to_job, to_run
from appliance.sandbox._settings import SandboxSettings
from tools import JobOutput, ShellRun

__all__ = ["MicroVM", "VMImage", "find_virtiofsd"]

_PORT = "abhed.agent"
_KVM_PROBE_TIMEOUT_S = 30.0
# (qemu binary, kernel) -> accel that booted; a failed KVM boot is not retried.
_ACCEL_CHOICE: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class VMImage:
    """An image folder as ``python -m bundle.image build`` writes it."""

    dir: Path
    manifest: dict[str, Any]

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    @property
    def rootfs(self) -> Path:
        return self.dir / "rootfs.ext4"

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> VMImage:
        d = Path(path)
        missing = [n for n in ("vmlinuz", "initrd.img", "rootfs.ext4", "manifest.json")
                   if not (d / n).is_file()]
        if missing:
            raise SandboxUnavailable(
                f"microVM image at {d} is incomplete (missing {', '.join(missing)}); build one with "
                "`python -m bundle.image build --recipe default` and set sandbox.image_dir to it")
        try:
            manifest = json.loads((d / "manifest.json").read_text())
        except (OSError, ValueError) as exc:
            raise SandboxUnavailable(f"{d}/manifest.json is unreadable ({exc}); rebuild the image") from None
        if not isinstance(manifest, dict):
            raise SandboxUnavailable(f"{d}/manifest.json is not an object; rebuild the image")
        return cls(d, manifest)


def find_virtiofsd() -> str | None:
    for cand in ("/usr/libexec/virtiofsd", "/usr/lib/qemu/virtiofsd"):
        if os.access(cand, os.X_OK):
            return cand
    return shutil.which("virtiofsd")


_PRCTL: Any = None


def _die_with_parent() -> None:
    # Only armed when the VM is started from the main thread: PDEATHSIG fires
    # when the *thread* that forked exits.
    # Runs in the forked child: only calls a function resolved before the fork.
    _PRCTL(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _stop(proc: subprocess.Popen[bytes] | None, grace_s: float = 3.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _Guest:
    """One running VM: virtiofsd + QEMU + the agent connection."""

    def __init__(self, workspace: str, image: VMImage, settings: SandboxSettings, accel: str) -> None:
        self.accel = accel
        self.dir = tempfile.mkdtemp(prefix="abhed-vm-")
        self.console = os.path.join(self.dir, "console.log")
        self.vfsd: subprocess.Popen[bytes] | None = None
        self.qemu: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.buf = b""
        self.next_id = 0
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()  # writes only: notify() may send while request() waits
        self.hello: dict[str, Any] = {}
        started = time.monotonic()
        try:
            self._start(workspace, image, settings)
            timeout = settings.boot_timeout_s if accel == "tcg" else min(
                settings.boot_timeout_s, _KVM_PROBE_TIMEOUT_S)
            self._await_agent(started + timeout)
        except BaseException:
            self.stop()
            raise
        self.boot_ms = round((time.monotonic() - started) * 1000, 1)

    def _start(self, workspace: str, image: VMImage, settings: SandboxSettings) -> None:
        vfsd = find_virtiofsd()
        if vfsd is None:
            raise SandboxUnavailable("virtiofsd is not installed (Debian 12: qemu-system-common)")
        qemu = shutil.which(settings.qemu_binary)
        if qemu is None:
            raise SandboxUnavailable(f"{settings.qemu_binary} is not installed (apt-get install "
                                     "qemu-system-x86)")
        global _PRCTL
        if _PRCTL is None:
            _PRCTL = ctypes.CDLL(None).prctl
        # So that QEMU and virtiofsd die even if this process is killed -9.
        preexec = _die_with_parent if threading.current_thread() is threading.main_thread() else None
        fs_sock = os.path.join(self.dir, "fs.sock")
        agent_sock = os.path.join(self.dir, "agent.sock")
        log = open(os.path.join(self.dir, "virtiofsd.log"), "wb")  # noqa: SIM115
        with log:
            self.vfsd = subprocess.Popen(
                [vfsd, f"--socket-path={fs_sock}", "-o", f"source={workspace}", "-o", "cache=auto",
                 "-o", "no_xattr", "--thread-pool-size=4"] if not _rust_virtiofsd(vfsd) else
                [vfsd, f"--socket-path={fs_sock}", f"--shared-dir={workspace}", "--cache=auto",
                 "--sandbox=none"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                preexec_fn=preexec)  # noqa: PLW1509 - PDEATHSIG needs it; armed on the main thread only
        deadline = time.monotonic() + 10
        while not os.path.exists(fs_sock):
            if self.vfsd.poll() is not None or time.monotonic() > deadline:
                raise SandboxUnavailable(f"virtiofsd did not start: {self._log_tail('virtiofsd.log')}")
            time.sleep(0.01)
        mem = settings.memory_mib
        ws_hex = workspace.encode().hex()
        cmdline = f"console=ttyS0 quiet loglevel=3 panic=-1 abhed.ws={ws_hex} abhed.port={_PORT}"
        if self.accel == "kvm":
            machine = ["-M", "microvm,memory-backend=mem", "-accel", "kvm", "-cpu", "host"]
            bus = "device"
        else:
            machine = ["-M", "q35,memory-backend=mem", "-accel", "tcg", "-cpu", "max"]
            bus = "pci"
        argv = [
            qemu, *machine, "-m", f"{mem}M", "-smp", str(settings.vcpus),
            "-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-nic", "none",
            "-object", f"memory-backend-memfd,id=mem,size={mem}M,share=on",
            "-kernel", str(image.kernel), "-initrd", str(image.initrd), "-append", cmdline,
            "-drive", f"file={image.rootfs},if=none,id=root,format=raw,readonly=on",
            "-device", f"virtio-blk-{bus},drive=root",
            "-chardev", f"socket,id=fs,path={fs_sock}",
            "-device", f"vhost-user-fs-{bus},chardev=fs,tag=workspace",
            "-device", f"virtio-serial-{bus}",
            "-chardev", f"socket,id=agent,path={agent_sock},server=on,wait=off",
            "-device", f"virtserialport,chardev=agent,name={_PORT}",
            "-serial", f"file:{self.console}",
        ]
        qlog = open(os.path.join(self.dir, "qemu.log"), "wb")  # noqa: SIM115
        with qlog:
            self.qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog, stderr=qlog,
                                         start_new_session=True,
                                         preexec_fn=preexec)  # noqa: PLW1509 - as above
        deadline = time.monotonic() + 10
        while True:
            if self.qemu.poll() is not None:
                raise SandboxUnavailable(f"QEMU ({self.accel}) exited at start: "
                                         f"{self._log_tail('qemu.log')}")
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(agent_sock)
                self.sock = sock
                break
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise SandboxUnavailable("QEMU did not open the agent socket") from None
                time.sleep(0.02)

    def _log_tail(self, name: str) -> str:
        try:
            text = Path(self.dir, name).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text.strip()[-1500:] or "(empty log)"

    def _await_agent(self, deadline: float) -> None:
        while True:
            try:
                self.hello = self.request("hello", wait_s=1.0)
                break
            except SandboxCrashed:
                raise SandboxUnavailable(
                    f"the VM ({self.accel}) stopped while booting: {self._log_tail('qemu.log')}\n"
                    f"console:\n{self._log_tail('console.log')}") from None
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise SandboxUnavailable(
                        f"the VM ({self.accel}) did not reach its agent in time; console:\n"
                        f"{self._log_tail('console.log')}") from None
        if self.hello.get("protocol") != PROTOCOL_VERSION:
            raise SandboxUnavailable(
                f"the image's guest agent speaks protocol {self.hello.get('protocol')}, this "
                f"Abhed speaks {PROTOCOL_VERSION}; rebuild the image with this version")

    def _alive(self) -> None:
        if self.qemu is None or self.qemu.poll() is not None:
            raise SandboxCrashed(f"the session VM ({self.accel}) stopped; console:\n"
                                 f"{self._log_tail('console.log')}\nA new one starts on the next call.")

    def notify(self, op: str) -> None:
        """Send a request without waiting (``request`` may hold the channel meanwhile).

        Its reply carries an id nobody waits for and is skipped by ``request``.
        """
        if self.sock is None:
            return
        line = json.dumps({"id": f"notify-{op}", "op": op}, separators=(",", ":")) + "\n"
        with self.send_lock:
            try:
                self.sock.sendall(line.encode())
            except OSError:
                pass  # the VM is gone: nothing left to interrupt

    def request(self, op: str, *, wait_s: float, **fields: Any) -> dict[str, Any]:
        """Send one request, wait for its reply (``TimeoutError`` if none in time)."""
        with self.lock:
            self._alive()
            assert self.sock is not None
            self.next_id += 1
            rid = self.next_id
            line = json.dumps({"id": rid, "op": op, **fields}, separators=(",", ":")) + "\n"
            try:
                with self.send_lock:
                    self.sock.sendall(line.encode())
            except OSError as exc:
                raise SandboxCrashed(f"lost the guest agent ({exc})") from None
            deadline = time.monotonic() + wait_s
            while True:
                while b"\n" in self.buf:
                    raw, self.buf = self.buf.split(b"\n", 1)
                    try:
                        reply = json.loads(raw)
                    except ValueError:
                        continue
                    if not isinstance(reply, dict) or reply.get("id") != rid:
                        continue  # a reply to an earlier, abandoned request
                    if not reply.get("ok"):
                        raise _AgentRefused(str(reply.get("error")))
                    result = reply.get("result")
                    return result if isinstance(result, dict) else {}
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no reply to {op} in {wait_s:.0f}s")
                self.sock.settimeout(min(left, 0.5))
                try:
                    chunk = self.sock.recv(1 << 20)
                except TimeoutError:
                    self._alive()
                    continue
                except OSError as exc:
                    raise SandboxCrashed(f"lost the guest agent ({exc})") from None
                if not chunk:
                    self._alive()
                    raise SandboxCrashed("the guest agent closed its channel")
                self.buf += chunk

    def stop(self) -> None:
        if self.sock is not None and self.qemu is not None and self.qemu.poll() is None:
            with contextlib.suppress(Exception):
                self.request("shutdown", wait_s=2.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.qemu.wait(3.0)
        if self.sock is not None:
            self.sock.close()
        _stop(self.qemu)
        _stop(self.vfsd)
        shutil.rmtree(self.dir, ignore_errors=True)


class _AgentRefused(Exception):
    pass


def _rust_virtiofsd(path: str) -> bool:
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--shared-dir" in out


class MicroVM:
    """The session microVM behind the ``ShellSandbox`` protocol (booted on first use)."""

    backend = "microvm"

    def __init__(self, workspace: str, image: VMImage | str | os.PathLike[str],
                 settings: SandboxSettings | None = None) -> None:
        self.workspace = os.path.realpath(workspace)
        self.cwd = self.workspace
        self.image = image if isinstance(image, VMImage) else VMImage.load(image)
        self.settings = settings or SandboxSettings()
        self._guest: _Guest | None = None
        self._boot_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------
    def boot(self) -> _Guest:
        """Start the VM if it is not running; return it.

        A VM that died is reported once (``SandboxCrashed``: its jobs, /tmp and
        working directory are gone) and replaced by a fresh one on the next call,
        so the model learns that state was lost instead of meeting it silently.
        """
        with self._boot_lock:
            guest = self._guest
            if guest is not None and guest.qemu is not None and guest.qemu.poll() is None:
                return guest
            if guest is not None:
                console = guest._log_tail("console.log")
                guest.stop()
                self._guest = None
                self.cwd = self.workspace
                raise SandboxCrashed(
                    f"the session VM ({guest.accel}) stopped; its background jobs, /tmp and "
                    f"working directory are gone. Console:\n{console}\nThe next call starts a "
                    "new VM.")
            self._guest = self._boot()
            return self._guest

    def _boot(self) -> _Guest:
        key = (self.settings.qemu_binary, str(self.image.kernel))
        accel: str = self.settings.accel
        if accel == "auto":
            accel = _ACCEL_CHOICE.get(key, "")
            if not accel:
                if os.access("/dev/kvm", os.R_OK | os.W_OK):
                    try:
                        guest = _Guest(self.workspace, self.image, self.settings, "kvm")
                    except SandboxUnavailable:
                        _ACCEL_CHOICE[key] = "tcg"
                    else:
                        _ACCEL_CHOICE[key] = "kvm"
                        return guest
                accel = "tcg"
                _ACCEL_CHOICE[key] = accel
        return _Guest(self.workspace, self.image, self.settings, accel)

    @property
    def accel(self) -> str | None:
        return self._guest.accel if self._guest else None

    @property
    def boot_ms(self) -> float | None:
        return self._guest.boot_ms if self._guest else None

    @property
    def guest_kernel(self) -> str | None:
        return str(self._guest.hello.get("kernel")) if self._guest else None

    def close(self) -> None:
        with self._boot_lock:
            if self._guest is not None:
                self._guest.stop()
                self._guest = None

    def __enter__(self) -> MicroVM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ShellSandbox -----------------------------------------------------
    def _env(self, env: Mapping[str, str]) -> dict[str, str]:
        return base_env(self.settings, env, "/root")

    def run(self, command: str, *, cwd: str, env: Mapping[str, str], timeout_s: float) -> ShellRun:
        guest = self.boot()
        wait = timeout_s + self.settings.kill_grace_s + 30
        try:
            raw = guest.request("run", wait_s=wait, command=command, cwd=cwd,
                                env=self._env(env), timeout_s=timeout_s)
        except TimeoutError as exc:
            raise SandboxCrashed(f"the guest agent stopped answering ({exc})") from None
        except _AgentRefused as exc:
            raise ValueError(str(exc)) from None
        return to_run(raw)

    def start(self, command: str, *, cwd: str, env: Mapping[str, str]) -> str:
        guest = self.boot()
        try:
            raw = guest.request("start", wait_s=30, command=command, cwd=cwd,
                                env=self._env(env))
        except _AgentRefused as exc:
            raise ValueError(str(exc)) from None
        return str(raw["job_id"])

    def interrupt(self) -> None:
        guest = self._guest
        if guest is not None:
            guest.notify("interrupt")

    def job(self, job_id: str, *, offset: int = 0, kill: bool = False) -> JobOutput:
        if self._guest is None:
            raise KeyError(f"no background job {job_id!r} in this session (jobs: none)")
        guest = self.boot()
        try:
            raw = guest.request("job", wait_s=self.settings.kill_grace_s + 30, job_id=job_id,
                                offset=offset, kill=kill)
        except _AgentRefused as exc:
            if exc.args and str(exc.args[0]).startswith("KeyError"):
                raise KeyError(str(exc.args[0]).removeprefix("KeyError: ").strip("\"'")) from None
            raise ValueError(str(exc)) from None
        return to_job(raw)
