"""The health gate of a release with site settings runs as engineers will get it.

Every copy of ``abhed`` on the host finds the site layer through ``PREFIX/current``
(``/etc/abhed/site`` and each venv's ``abhed-site`` link point at
``PREFIX/current/site``), so while a release is gated, before the switch, the host's
``current`` is still the old release (or, at a first install, nothing: the links would
dangle, and the agent refuses a broken site layer).  Switching first to find out is
not an option: a failed gate must leave the host untouched.

So the gate runs in a forked child with private mount and network namespaces
(``unshare(2)``; the installer is root, as site settings require):

* **mount**: a small tmpfs covers ``PREFIX``; every entry of the real prefix is bound
  back into it (``releases``, ``logs``, ``state``, ``store``, ...) except ``current``,
  which is a new link to the release being gated.  Inside, ``PREFIX/current/site`` is
  that release's settings; outside, nothing changed.  Mount events do not propagate
  out (``/`` is made private first).
* **network**: a namespace with loopback only, brought up: the model server and the
  agent reach each other, nothing reaches anything else (the gate proves the release
  works offline), and the model server can listen on the port the site's settings
  name without meeting the live service on the host.

The child runs the ordinary gate and hands its steps (or its refusal) back over a
pipe as JSON; an interrupt of the parent ends the child, which stops its model server.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import signal
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._errors import HealthCheckFailed, Interrupted, StepFailed
from ._health import HealthStep
from ._layout import Layout

__all__ = ["isolated"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT = 1, 2, 4, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_KEEP_OUT = {"current", ".lock"}


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enc(value: str | Path | None) -> bytes | None:
    return None if value is None else str(value).encode()


def _mount(libc: Any, source: str | None, target: str | Path, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    enc = _enc
    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or ''} on {target}")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, _SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def enter(layout: Layout, version: int) -> None:
    """Make this process's view of the host one where ``current`` is ``version``."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET), "unshare")
    _mount(libc, "none", "/", None, _MS_REC | _MS_PRIVATE)
    _loopback_up()
    prefix = layout.prefix
    # The real prefix stays reachable through a descriptor once the tmpfs covers it.
    real = os.open(prefix, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        names = [n for n in os.listdir(prefix)
                 if n not in _KEEP_OUT and not n.startswith(".current.")]
        _mount(libc, "tmpfs", prefix, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
        for name in names:
            source = f"/proc/self/fd/{real}/{name}"
            target = prefix / name
            if os.path.islink(source):
                os.symlink(os.readlink(source), target)
                continue
            if os.path.isdir(source):
                target.mkdir()
            else:
                target.touch()
            _mount(libc, source, target, None, _MS_BIND | _MS_REC)
        os.symlink(f"releases/{version}", prefix / "current")
        # Read-only from here: what the gate writes must land in the real prefix, through
        # the binds; a write anywhere else under PREFIX fails loudly instead of vanishing
        # with the namespace (a first install's probe record once did: state/ did not
        # exist yet, so it was made on the tmpfs).
        _mount(libc, None, prefix, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    finally:
        os.close(real)


def _child(layout: Layout, version: int, gate: Callable[[], list[HealthStep]], write: int) -> None:
    payload: dict[str, Any]
    try:
        try:
            enter(layout, version)
        except OSError as exc:
            raise StepFailed(f"cannot give the gate its own mount and network namespaces "
                             f"({exc.strerror or exc}); the installer must run as root on a "
                             "kernel with namespaces (site settings need root anyway)") from None
        steps = gate()
        payload = {"steps": [{"name": s.name, "seconds": s.seconds, "detail": s.detail,
                              "audit": s.audit} for s in steps]}
    except HealthCheckFailed as exc:
        payload = {"gate_failed": str(exc)}
    except StepFailed as exc:
        payload = {"step_failed": str(exc)}
    except (Interrupted, KeyboardInterrupt) as exc:
        payload = {"interrupted": getattr(exc, "signum", int(signal.SIGINT))}
    except BaseException as exc:  # reported to the parent, which raises it there
        payload = {"error": f"{type(exc).__name__}: {exc}"}
    view = memoryview(json.dumps(payload).encode())
    while view:
        view = view[os.write(write, view):]


def _step(d: dict[str, Any]) -> HealthStep:
    return HealthStep(str(d["name"]), float(d["seconds"]), str(d["detail"]), d.get("audit"))


def isolated(layout: Layout, version: int, gate: Callable[[], list[HealthStep]]) -> list[HealthStep]:
    """Run ``gate`` in a child whose namespaces show ``version`` as current (module doc)."""
    # What the gate writes (its logs, the probe's record under state/) goes through binds
    # of the real directories, so they must exist before the view is made (a first install).
    for d in (layout.state_dir, layout.logs):
        d.mkdir(parents=True, exist_ok=True)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            _child(layout, version, gate, write)
        finally:
            os._exit(0)
    os.close(write)
    try:
        chunks = []
        while chunk := os.read(read, 1 << 16):
            chunks.append(chunk)
        os.waitpid(pid, 0)
    except BaseException:
        # Interrupted: the child stops its model server on SIGTERM; wait for it.
        try:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        except OSError as exc:
            if exc.errno not in (errno.ESRCH, errno.ECHILD):
                raise
        raise
    finally:
        os.close(read)
    try:
        result = json.loads(b"".join(chunks))
    except ValueError:
        raise StepFailed("the gate's process ended without a result (killed?); nothing was "
                         "switched") from None
    if "steps" in result:
        return [_step(s) for s in result["steps"]]
    if "gate_failed" in result:
        raise HealthCheckFailed(result["gate_failed"])
    if "interrupted" in result:
        raise Interrupted(int(result["interrupted"]))
    raise StepFailed(result.get("step_failed") or f"the gate failed: {result.get('error')}")
