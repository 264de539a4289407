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

**An agent host's gate** (role agent, ``installer._roles``) has no model server of its
own: it proves that an engineer gets an answer from the site's model service, so its
network must reach the site's declared model endpoints, and nothing else.  No route is
added and the host's network and firewall are never touched:

* each endpoint's address (a name is resolved before the namespace is made, and written
  into a private ``/etc/hosts`` bound over the host's inside the gate's mount namespace)
  is added to the gate's loopback, and a listener is bound there on the endpoint's port;
* a relay thread of the gate's process enters the host's network namespace (``setns(2)``
  acts on the calling thread only) and, for each connection a listener accepts, connects
  to that same endpoint from there and copies bytes both ways.

So inside the gate ``http://10.0.0.5:8000/v1`` answers exactly as it does for an engineer,
while any other address has no route and any other port on the endpoint's address is
refused: the relay only ever dials the declared (address, port) pairs.

The child runs the ordinary gate and hands its steps (or its refusal) back over a
pipe as JSON; an interrupt of the parent ends the child, which stops its model server.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import ipaddress
import json
import os
import selectors
import signal
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ._errors import HealthCheckFailed, Interrupted, StepFailed
from ._health import HealthStep
from ._layout import Layout

__all__ = ["add_address", "isolated", "private_dir", "resolve_endpoints"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT = 1, 2, 4, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_SIOCSIFADDR, _SIOCSIFNETMASK = 0x8916, 0x891C
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


Endpoint = tuple[str, str, int]
"""(the name the URL gives, its IPv4 or IPv6 address, port): one declared model endpoint."""


def resolve_endpoints(urls: Sequence[str]) -> list[Endpoint]:
    """Each declared endpoint's address, resolved here (on the host's network, before the
    gate's namespace exists): its IPv4 address if it has one, else its IPv6 one (an IPv6
    literal, ``https://[fd00::5]:8443/v1``, is its own); StepFailed names one that does not
    resolve."""
    from bundle import endpoint_address

    found: list[Endpoint] = []
    for url in urls:
        host, port = endpoint_address(url)
        try:
            infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM)
            infos.sort(key=lambda i: i[0] != socket.AF_INET)  # IPv4 first, as a dialler would
            addr = str(infos[0][4][0]).split("%", 1)[0]
        except (OSError, IndexError) as exc:
            raise StepFailed(f"the site's model endpoint {url}: {host} does not resolve to an "
                             f"address on this host ({exc}); fix the name (DNS or "
                             "/etc/hosts) or declare the address in [roles] model_endpoints") \
                from None
        found.append((host, addr, port))
    return found


def _add_address6(address: str) -> None:
    """Loopback's IPv6 ``address`` (/128), by ``SIOCSIFADDR`` on an AF_INET6 socket (the
    kernel's ``in6_ifreq``: address, prefix length, interface index).  Duplicate address
    detection is turned off for this namespace's loopback first (``accept_dad``: a
    sysctl of the namespace, not the host's), else the address stays "tentative" and
    cannot be bound for a moment; then it is waited for until usable."""
    try:
        Path("/proc/sys/net/ipv6/conf/lo/accept_dad").write_text("0\n")
    except OSError:
        pass  # no such knob: no DAD to wait for, or the wait below tells
    packed = socket.inet_pton(socket.AF_INET6, address)
    req = struct.pack("16sIi", packed, 128, socket.if_nametoindex("lo"))
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, _SIOCSIFADDR, req)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address, 0))
                return
            except OSError as exc:
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise
        time.sleep(0.05)
    raise OSError(errno.EADDRNOTAVAIL, f"{address} did not become usable on loopback")


def add_address(address: str, index: int) -> None:
    """Give this network namespace's loopback ``address`` (IPv4: alias ``lo:<index>``, /32;
    IPv6: /128), so a listener can be bound on it; 127.0.0.0/8 and ::1 are there already."""
    ip = ipaddress.ip_address(address)
    if ip.is_loopback:
        return
    if ip.version == 6:
        _add_address6(address)
        return
    name = f"lo:{index}".encode()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for request, value in ((_SIOCSIFADDR, address), (_SIOCSIFNETMASK, "255.255.255.255")):
            sin = struct.pack("HH4s8x", socket.AF_INET, 0, socket.inet_aton(value))
            fcntl.ioctl(s, request, struct.pack("16s16s8x", name, sin))


@contextlib.contextmanager
def private_dir(path: Path) -> Iterator[None]:
    """While inside: ``path`` covered with an empty tmpfs in this (the gate's private)
    mount namespace: the gate's relay listens there (``installer._gate_relay``) where the
    host's own relay has its socket, which stays untouched outside.  A directory missing
    on the host is made for the mount (root 0755) and removed after it."""
    made = not path.is_dir()
    if made:
        path.mkdir(mode=0o755, parents=True)
    libc = _libc()
    try:
        _mount(libc, "tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
        try:
            yield
        finally:
            _check(libc.umount2(_enc(path), 0), f"umount {path}")
    finally:
        if made:
            path.rmdir()


def _hosts_file(libc: Any, endpoints: Sequence[Endpoint]) -> None:
    """A private /etc/hosts (the host's, plus each endpoint's name) bound over the host's in
    this mount namespace: the agent resolves the names the settings use, with no DNS."""
    names = [(addr, host) for host, addr, _ in endpoints if host != addr]
    if not names:
        return
    try:
        base = Path("/etc/hosts").read_text("utf-8", "replace")
    except OSError:
        base = "127.0.0.1 localhost\n"
    fd, path = tempfile.mkstemp(prefix="abhed-gate-hosts-")
    try:
        os.write(fd, (base.rstrip("\n") + "\n" + "".join(f"{a} {h}\n" for a, h in names))
                 .encode())
        os.fchmod(fd, 0o644)
        os.close(fd)
        _mount(libc, path, "/etc/hosts", None, _MS_BIND)
    finally:
        os.unlink(path)  # the bind keeps it for this namespace; nothing stays on the host


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _relay(listeners: list[tuple[socket.socket, tuple[str, int]]], host_ns: int) -> None:
    """Accept in the gate's namespace; dial the same endpoint from the host's (this thread
    only enters it); copy both ways.  Runs until the gate's process exits."""
    _check(_libc().setns(host_ns, _CLONE_NEWNET), "setns to the host's network")
    with selectors.DefaultSelector() as sel:
        for sock, target in listeners:
            sel.register(sock, selectors.EVENT_READ, target)
        while True:
            for key, _ in sel.select():
                conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                try:
                    out = socket.create_connection(key.data, timeout=30)
                    out.settimeout(None)
                except OSError:
                    conn.close()  # the endpoint refused: so does the gate's side
                    continue
                for a, b in ((conn, out), (out, conn)):
                    threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _open_endpoints(libc: Any, endpoints: Sequence[Endpoint], host_ns: int) -> None:
    """Inside the gate's fresh namespaces: the endpoints' addresses, names and listeners,
    and the relay that carries their connections out (module doc)."""
    _hosts_file(libc, endpoints)
    listeners: list[tuple[socket.socket, tuple[str, int]]] = []
    for i, (_, addr, port) in enumerate(endpoints):
        add_address(addr, i)
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((addr, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:  # two URLs on one address and port: one relay
                raise
            sock.close()
            continue
        sock.listen(64)
        listeners.append((sock, (addr, port)))
    threading.Thread(target=_relay, args=(listeners, host_ns), daemon=True,
                     name="abhed-gate-relay").start()


def enter(layout: Layout, version: int, endpoints: Sequence[Endpoint] = (),
          host_ns: int = -1) -> None:
    """Make this process's view of the host one where ``current`` is ``version``; with
    ``endpoints``, its network reaches those (through ``host_ns``) and nothing else."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET), "unshare")
    _mount(libc, "none", "/", None, _MS_REC | _MS_PRIVATE)
    _loopback_up()
    if endpoints:
        _open_endpoints(libc, endpoints, host_ns)
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


def _child(layout: Layout, version: int, gate: Callable[[], list[HealthStep]], write: int,
           endpoints: Sequence[Endpoint], host_ns: int) -> None:
    payload: dict[str, Any]
    try:
        try:
            enter(layout, version, endpoints, host_ns)
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


def isolated(layout: Layout, version: int, gate: Callable[[], list[HealthStep]], *,
             endpoints: Sequence[str] = ()) -> list[HealthStep]:
    """Run ``gate`` in a child whose namespaces show ``version`` as current (module doc);
    its network reaches the model ``endpoints`` (URLs) and nothing else."""
    # What the gate writes (its logs, the probe's record under state/) goes through binds
    # of the real directories, so they must exist before the view is made (a first install).
    for d in (layout.state_dir, layout.logs):
        d.mkdir(parents=True, exist_ok=True)
    resolved = resolve_endpoints(endpoints)
    host_ns = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC) if resolved else -1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            _child(layout, version, gate, write, resolved, host_ns)
        finally:
            os._exit(0)
    os.close(write)
    if host_ns >= 0:
        os.close(host_ns)
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
