"""The ``microvm`` backend: one QEMU guest per session, the workspace shared live.

The VM is started on first use (lazily) and stopped with the session:

* virtiofsd shares the workspace; the guest mounts it at the *same absolute
  path*, so paths in commands and in tool results agree;
* the root is the image's read-only ext4 with a throwaway tmpfs overlay;
* there is no network device at all (``-nic none``): the guest has ``lo`` only;
* the guest agent (``foundation/guest.py``, PID 1 in the guest) listens on a
  virtio-serial port whose host end is a Unix socket (vsock is not available
  everywhere; virtio-serial is).

Acceleration: with ``accel = "auto"`` the first boot tries KVM on the
``microvm`` machine (virtio-mmio devices) and, if that boot does not reach the
agent, falls back to software emulation on ``q35`` (virtio-pci devices;
``microvm`` under TCG hangs in timer calibration).  The choice is a real boot,
not a look at ``/dev/kvm``; it is remembered for this process and, per host
kernel, QEMU build and image, across sessions (``_accel``), so a host whose
KVM cannot boot the guest pays the failed attempt once, not every session.

Start-up: :meth:`MicroVM.boot_in_background` (called when the session opens,
``sandbox.boot_at_open``) boots the guest in a thread while the model thinks,
so the first command rarely waits; a command that arrives early waits for that
same boot.  The thread stays alive while its guest runs: the kernel's
parent-death signal, which takes QEMU and virtiofsd down with a killed Abhed,
is tied to the thread that started them.
"""

from __future__ import annotations

import base64
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from appliance.sandbox import _accel
from appliance.sandbox._errors import SandboxCrashed, SandboxUnavailable
from appliance.sandbox._local import base_env, to_job, to_run
from appliance.sandbox._settings import SandboxSettings
from foundation import FoundationError, parse_document, read_regular, terminate_group, under
from foundation.guest import PROTOCOL_VERSION
from tools import JobOutput, ShellRun

__all__ = ["MicroVM", "VMImage", "find_virtiofsd", "kvm_unusable_reason", "kvm_usable",
           "remembered_tcg_reason"]

_PORT = "abhed.agent"
_KVM_PROBE_TIMEOUT_S = 30.0
_INTERRUPT_REPLY_S = 2.0  # a guest that has not said what it signalled by then: unknown
# (qemu binary, kernel) -> (accel that booted, why not KVM when it is tcg); a failed KVM
# boot is not retried.
_ACCEL_CHOICE: dict[tuple[str, str], tuple[str, str]] = {}


@dataclass(frozen=True)
class VMImage:
    """An image folder as ``python -m bundle.image build`` writes it."""

    dir: Path
    manifest: dict[str, Any]

    kernel = under("vmlinuz", root="dir")
    initrd = under("initrd.img", root="dir")
    rootfs = under("rootfs.ext4", root="dir")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> VMImage:
        d = Path(path)
        if not d.is_dir():
            what = "is not a folder" if d.exists() else "does not exist"
            raise SandboxUnavailable(f"microVM image folder {d} {what}; " + build_advice(d))
        missing = [n for n in ("vmlinuz", "initrd.img", "rootfs.ext4", "manifest.json")
                   if not (d / n).is_file()]
        if missing:
            raise SandboxUnavailable(
                f"microVM image at {d} is incomplete (missing {', '.join(missing)}); "
                + build_advice(d))
        try:
            manifest = parse_document(read_regular(d / "manifest.json", 1 << 20, "image manifest"),
                                      what="image manifest", source=d / "manifest.json",
                                      hint="Rebuild the image.")
        except (OSError, FoundationError) as exc:
            raise SandboxUnavailable(str(exc)) from None
        return cls(d, manifest)


def build_advice(target: Path) -> str:
    """How to get an image where ``target`` is: the command, where it writes, what it needs.

    Said as text: ``bundle.image`` (the builder, which owns the cache's place) is not
    imported from here (the package arrows keep appliance off bundle).
    """
    return ("build one (once, a few minutes; it needs root or passwordless sudo, and "
            "debootstrap, busybox-static, e2fsprogs and the linux-image-cloud-amd64 package): "
            "`python -m bundle.image build --recipe default` writes it under "
            "~/.cache/abhed/images/default-KEY (ABHED_IMAGE_CACHE moves it) and prints that "
            f"folder; then set sandbox.image_dir to it, or link it here: "
            f"`ln -sfn \"$(python -m bundle.image build --recipe default)\" {target}`")


def kvm_usable() -> bool:
    """Whether this process may open /dev/kvm (read and write), as a boot needs."""
    return os.access("/dev/kvm", os.R_OK | os.W_OK)


def kvm_unusable_reason() -> str | None:
    """Why this process cannot use ``/dev/kvm``, and what to do (None: it can).

    The one wording of it: a boot's ``accel_why`` (``abhed sandbox check``) and
    ``kvm_status`` (``abhed doctor``) both say this.
    """
    if not os.path.exists("/dev/kvm"):
        return ("/dev/kvm does not exist: this host exposes no hardware virtualisation "
                "(in a VM: enable nested virtualisation); the microVM boots under software "
                "emulation, several times slower")
    if not kvm_usable():
        return ("/dev/kvm exists but you cannot open it for reading and writing; add "
                "yourself to its group (usually `kvm`: sudo usermod -aG kvm $USER, then log "
                "in again)")
    return None


def remembered_tcg_reason(key: str) -> str:
    """Why a boot goes straight to software emulation: the verdict a failed KVM boot left."""
    reason = " ".join((_accel.recalled_reason(key) or "a KVM boot failed").split())[:300]
    return (f"KVM failed to boot this image on this host before ({reason}); software "
            f"emulation is used until the kernel, QEMU or image changes (remembered in "
            f"{_accel.state_path()}; delete that file to try KVM again)")


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
    if proc is not None:
        terminate_group(proc, grace_s=grace_s)


class _Guest:
    """One running VM: virtiofsd + QEMU + the agent connection."""

    def __init__(self, workspace: str, image: VMImage, settings: SandboxSettings, accel: str,
                 *, owned: bool = False, cancel: threading.Event | None = None) -> None:
        """Boot and wait for the agent.  ``owned``: the calling thread lives as long as
        the guest (the main thread, or a boot thread that waits for the guest to stop),
        so the parent-death signal may be armed; ``cancel`` abandons the boot."""
        self.accel = accel
        self.cancel = cancel
        self.kill_grace_s = settings.kill_grace_s
        self.stopped = threading.Event()
        self.dir = tempfile.mkdtemp(prefix="abhed-vm-")
        self.console = os.path.join(self.dir, "console.log")
        self.vfsd: subprocess.Popen[bytes] | None = None
        self.qemu: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.next_id = 0
        self.lock = threading.Lock()  # the waiting table and the id counter
        self.send_lock = threading.Lock()  # one writer at a time on the channel
        # Requests are answered concurrently and out of order (the agent serves each in a
        # thread), so a reader thread hands each reply to the request waiting for its id:
        # a subagent's `sleep 30` does not hold up its sibling's `ls`.
        self._waiting: dict[int, _Reply] = {}
        self._lost = False  # the channel closed: every waiting request fails
        self.hello: dict[str, Any] = {}
        started = time.monotonic()
        try:
            self._start(workspace, image, settings,
                        owned or threading.current_thread() is threading.main_thread())
            timeout = settings.boot_timeout_s if accel == "tcg" else min(
                settings.boot_timeout_s, _KVM_PROBE_TIMEOUT_S)
            self._await_agent(started + timeout)
        except BaseException:
            self.stop()
            raise
        self.boot_ms = round((time.monotonic() - started) * 1000, 1)

    def _start(self, workspace: str, image: VMImage, settings: SandboxSettings, owned: bool) -> None:
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
        preexec = _die_with_parent if owned else None
        fs_sock = os.path.join(self.dir, "fs.sock")
        agent_sock = os.path.join(self.dir, "agent.sock")
        log = open(os.path.join(self.dir, "virtiofsd.log"), "wb")
        with log:
            self.vfsd = subprocess.Popen(
                [vfsd, f"--socket-path={fs_sock}", "-o", f"source={workspace}", "-o", "cache=auto",
                 "-o", "no_xattr", "--thread-pool-size=4"] if not _rust_virtiofsd(vfsd) else
                [vfsd, f"--socket-path={fs_sock}", f"--shared-dir={workspace}", "--cache=auto",
                 "--sandbox=none"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                preexec_fn=preexec)
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
        qlog = open(os.path.join(self.dir, "qemu.log"), "wb")
        with qlog:
            self.qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog, stderr=qlog,
                                         start_new_session=True,
                                         preexec_fn=preexec)
        deadline = time.monotonic() + 10
        while True:
            if self.qemu.poll() is not None:
                raise SandboxUnavailable(f"QEMU ({self.accel}) exited at start: "
                                         f"{self._log_tail('qemu.log')}")
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(agent_sock)
                self.sock = sock
                threading.Thread(target=self._read_replies, args=(sock,), name="abhed-vm-replies",
                                 daemon=True).start()
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
                # The operator's grace reaches the guest's runner (an older image ignores it).
                self.hello = self.request("hello", wait_s=1.0, grace_s=self.kill_grace_s)
                break
            except SandboxCrashed:
                raise SandboxUnavailable(
                    f"the VM ({self.accel}) stopped while booting: {self._log_tail('qemu.log')}\n"
                    f"console:\n{self._log_tail('console.log')}") from None
            except TimeoutError:
                if self.cancel is not None and self.cancel.is_set():
                    raise SandboxUnavailable("the VM's boot was cancelled: the session closed") from None
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

    def _read_replies(self, sock: socket.socket) -> None:
        """Hand each reply line to the request waiting for its id, until the channel closes."""
        buf = b""
        while True:
            try:
                chunk = sock.recv(1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                try:
                    reply = json.loads(raw)
                except ValueError:
                    continue
                rid = reply.get("id") if isinstance(reply, dict) else None
                with self.lock:
                    waiter = self._waiting.get(rid) if isinstance(rid, int) else None
                if waiter is not None and "ok" not in reply:  # a running command's output
                    waiter.interim(reply)
                elif waiter is not None:  # else a notify's, or an abandoned request's
                    waiter.reply = reply
                    waiter.done.set()
        with self.lock:
            self._lost = True
            waiters = list(self._waiting.values())
        for waiter in waiters:
            waiter.done.set()

    def request(self, op: str, *, wait_s: float,
                on_output: Callable[[bytes], None] | None = None, **fields: Any) -> dict[str, Any]:
        """Send one request, wait for its reply (``TimeoutError`` if none in time).

        ``on_output``: the request streams (a run asked with ``"stream": true``), and
        hears each interim output line's bytes on the reader thread.
        """
        self._alive()
        assert self.sock is not None
        waiter = _Reply(on_output=on_output)
        with self.lock:
            if self._lost:
                raise SandboxCrashed("the guest agent closed its channel")
            self.next_id += 1
            rid = self.next_id
            self._waiting[rid] = waiter
        try:
            line = json.dumps({"id": rid, "op": op, **fields}, separators=(",", ":")) + "\n"
            try:
                with self.send_lock:
                    self.sock.sendall(line.encode())
            except OSError as exc:
                raise SandboxCrashed(f"lost the guest agent ({exc})") from None
            deadline = time.monotonic() + wait_s
            while not waiter.done.wait(max(0.0, min(deadline - time.monotonic(), 0.5))):
                self._alive()
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"no reply to {op} in {wait_s:.0f}s")
        finally:
            with self.lock:
                self._waiting.pop(rid, None)
        reply = waiter.reply
        if reply is None:  # woken because the channel closed
            self._alive()
            raise SandboxCrashed("the guest agent closed its channel")
        if not reply.get("ok"):
            raise _AgentRefused(str(reply.get("error")))
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

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
        self.stopped.set()


class _AgentRefused(Exception):
    pass


@dataclass
class _Reply:
    """One request waiting for its reply (and, for a streamed run, hearing its output)."""

    done: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] | None = None
    on_output: Callable[[bytes], None] | None = None

    def interim(self, line: dict[str, Any]) -> None:
        if self.on_output is None:
            return
        try:
            data = base64.b64decode(str(line.get("output_b64", "")), validate=True)
        except ValueError:
            return  # a line the host cannot read: the final reply still holds the output
        try:
            self.on_output(data)
        except Exception:
            self.on_output = None  # a listener that fails is dropped, the command runs on


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
        self._early: threading.Thread | None = None  # the background boot, while it runs
        self._early_done = threading.Event()
        self._early_error: BaseException | None = None
        self._cancel = threading.Event()
        #: Why the last boot did not use KVM ("" when it did, or before a boot): what
        #: ``abhed sandbox check`` says beside "booted with tcg".
        self.accel_why = ""

    def boot_in_background(self) -> None:
        """Start booting now, in a thread, so the first command finds the VM up.

        Does nothing when a guest runs or a boot is under way.  A boot that fails
        is reported by the next command, as a boot on first use would be.
        """
        with self._boot_lock:
            if self._guest is not None or self._early is not None:
                return
            self._early_done.clear()
            self._early_error = None
            self._cancel.clear()
            self._early = threading.Thread(target=self._boot_and_keep, name="abhed-vm-boot",
                                           daemon=True)
            self._early.start()

    def _boot_and_keep(self) -> None:
        try:
            guest = self._boot(owned=True)
        except BaseException as exc:
            self._early_error = exc
            self._early_done.set()
            return
        self._guest = guest
        self._early_done.set()
        # Live as long as the guest: QEMU's parent-death signal is tied to this thread.
        guest.stopped.wait()

    def _join_early(self) -> None:
        """Wait for a background boot (called with the boot lock held)."""
        if self._early is None:
            return
        self._early_done.wait()
        self._early = None
        error, self._early_error = self._early_error, None
        if error is not None:
            raise error

    # -- lifecycle --------------------------------------------------------
    def boot(self) -> _Guest:
        """Start the VM if it is not running; return it.

        A VM that died is reported once (``SandboxCrashed``: its jobs, /tmp and
        working directory are gone) and replaced by a fresh one on the next call,
        so the model learns that state was lost instead of meeting it silently.
        """
        with self._boot_lock:
            self._join_early()
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
            self._cancel.clear()
            self._guest = self._boot()
            return self._guest

    def _boot(self, *, owned: bool = False) -> _Guest:
        accel: str = self.settings.accel
        if accel != "auto":
            self.accel_why = "" if accel == "kvm" else "sandbox.accel is \"tcg\""
            return self._guest_with(accel, owned)
        key = (self.settings.qemu_binary, str(self.image.kernel))
        accel, self.accel_why = _ACCEL_CHOICE.get(key, ("", ""))
        if accel:
            return self._guest_with(accel, owned)
        host_key = _accel.probe_key(self.settings.qemu_binary, self.image.kernel,
                                    self.image.manifest)
        kvm_ok = kvm_usable()
        remembered = _accel.recall(host_key)
        if kvm_ok and remembered != "tcg":
            try:
                guest = self._guest_with("kvm", owned)
            except SandboxUnavailable as exc:
                kvm_failure = str(exc)
            else:
                _ACCEL_CHOICE[key] = ("kvm", "")
                self.accel_why = ""
                if remembered != "kvm":
                    _accel.remember(host_key, "kvm", "booted")
                return guest
        else:
            kvm_failure = ""
        guest = self._guest_with("tcg", owned)
        if not kvm_ok:
            why = kvm_unusable_reason() or "/dev/kvm cannot be used"
        elif kvm_failure:
            why = (f"the KVM boot failed: {kvm_failure} (remembered in {_accel.state_path()}; "
                   "delete that file to try KVM again)")
        else:
            why = remembered_tcg_reason(host_key)
        _ACCEL_CHOICE[key] = ("tcg", why)
        self.accel_why = why
        if kvm_failure:
            # Stored only now that software emulation booted: a failure that was
            # not KVM's (a broken image, virtiofsd) fails this boot too, and must
            # not be remembered as "this host's KVM cannot boot the guest".
            _accel.remember(host_key, "tcg", kvm_failure)
        return guest

    def _guest_with(self, accel: str, owned: bool) -> _Guest:
        return _Guest(self.workspace, self.image, self.settings, accel, owned=owned,
                      cancel=self._cancel)

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
        self._cancel.set()  # a background boot gives up within a second
        with self._boot_lock:
            with contextlib.suppress(Exception):
                self._join_early()
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

    def run(self, command: str, *, cwd: str, env: Mapping[str, str], timeout_s: float,
            owner: str = "", on_output: Callable[[bytes], None] | None = None) -> ShellRun:
        guest = self.boot()
        wait = timeout_s + self.settings.kill_grace_s + 30
        # An image whose agent cannot stream still runs the command; the output then
        # arrives with its end, as before.
        stream = on_output is not None and "stream" in (guest.hello.get("features") or ())
        try:
            raw = guest.request("run", wait_s=wait, on_output=on_output if stream else None,
                                command=command, cwd=cwd, env=self._env(env),
                                timeout_s=timeout_s, owner=owner,
                                **({"stream": True} if stream else {}))
        except TimeoutError as exc:
            raise SandboxCrashed(f"the guest agent stopped answering ({exc})") from None
        except _AgentRefused as exc:
            raise ValueError(str(exc)) from None
        return to_run(raw)

    def start(self, command: str, *, cwd: str, env: Mapping[str, str], owner: str = "") -> str:
        guest = self.boot()
        try:
            raw = guest.request("start", wait_s=30, command=command, cwd=cwd,
                                env=self._env(env), owner=owner)
        except _AgentRefused as exc:
            raise ValueError(str(exc)) from None
        return str(raw["job_id"])

    def interrupt(self, owner: str | None = None) -> int | None:
        """How many of ``owner``'s commands the guest signalled: 0 while no VM runs (a boot
        under way has nothing to signal yet), None when the guest did not say in time."""
        guest = self._guest
        if guest is None:
            return 0
        try:
            fields: dict[str, Any] = {} if owner is None else {"owner": owner}
            raw = guest.request("interrupt", wait_s=_INTERRUPT_REPLY_S, **fields)
        except (TimeoutError, SandboxCrashed, _AgentRefused):
            return None
        stopped = raw.get("stopped")
        return stopped if isinstance(stopped, int) else None

    def release(self, owner: str) -> None:
        guest = self._guest
        if guest is not None and guest.qemu is not None and guest.qemu.poll() is None:
            with contextlib.suppress(SandboxCrashed, TimeoutError, _AgentRefused):
                guest.request("release", wait_s=self.settings.kill_grace_s + 30, owner=owner)

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
