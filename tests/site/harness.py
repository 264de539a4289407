"""A simulated site on one machine: hosts as namespaces, engineers as real Unix users.

Each host is a network namespace (``ip netns add``) joined to the others by
a veth pair to one bridge in a switch namespace of the site's own: addresses
live only inside those namespaces (10.213.0.0/24), so nothing of the site
reaches the machine's own network, and the machine's network is not in the
site.  Each host also has its own mount and UTS namespaces, held by one
anchor process: its hostname, its own /etc (a copy of the machine's, with its
own passwd, group, hosts and hostname, and /etc/abhed, the site layer's fixed
place), its own /home and /srv (bind-mounted from the host's folder) and
its own empty /run and /tmp (tmpfs), so a user of one host does not exist on
another and a file one host writes is not on the next.  Nothing is created
in the machine's own /etc or /run.  Commands run in a
host through ``nsenter`` into the anchor's namespaces, as root or as one of
its users through ``setpriv`` (the uid, gid and groups of that user; no
capabilities).

Everything is torn down by :meth:`Site.close` (the fixture's finaliser and an
``atexit`` hook both call it): the anchors are killed and every namespace the
site named is deleted, which removes its veth pairs.  A site whose test
process died (SIGKILL, power) is swept by the next :func:`build_site`: the
namespaces carry the creating process's pid in their name.

Extending it (the serving issue adds model hosts): ``build_site`` takes the
model hosts' names, ``Site.add_host`` a role and users; ``SiteHost.run`` and
``Site.service``/``Site.stop`` run commands and services there (``taskset -c N``
in front pins one to a core); :func:`start_vllm` serves the test model on a
model host's loopback (``weights=wired_model(...)``: the one whose tool call an installed
agent host's health gate can check); ``SiteHost.path`` maps a path under the host's /etc,
/home or /srv to where it lives on the machine (for writing a host's files
from the test).
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.vllm_server import (
    SERVED,
    entry_for,
    free_port,
    served_url,
    tiny_model,
    vllm_python,
    wired_model,
    write_home,
)

__all__ = ["ENGINEERS", "SUBNET", "Site", "SiteHost", "SiteVllm", "build_site", "start_vllm",
           "sweep_stale", "wired_model"]

SUBNET = "10.213.0"
_PREFIX = "abhed-site-"
_FIRST_UID = 62001
# Paths each host has of its own; everything else (the repository, the venvs, /usr) is
# shared.  /run and /tmp are each host's own tmpfs.
_OWN_DIRS = ("etc", "home", "srv")


def _ip(*args: str, netns: str | None = None) -> None:
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")


def sweep_stale() -> list[str]:
    """Delete the namespaces of sites whose test process is gone; their names."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30,
                            check=False).stdout.split("\n")
    gone: list[str] = []
    for line in listed:
        name = line.split(" ", 1)[0]
        if not name.startswith(_PREFIX):
            continue
        pid = name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            # Its anchors and services outlived it (their own sessions): end them first.
            pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True,
                                  timeout=30, check=False).stdout.split()
            for left in pids:
                try:
                    os.kill(int(left), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30,
                           check=False)
            gone.append(name)
    for folder in Path("/var/tmp").glob(_PREFIX + "*"):
        pid = folder.name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)
    return gone


@dataclass
class SiteHost:
    """One simulated host: its namespaces (held by ``anchor``), its folder, its users."""

    name: str
    role: str
    address: str
    netns: str
    root: Path
    anchor: subprocess.Popen[str]
    anchor_pid: int
    users: dict[str, int] = field(default_factory=dict)

    def path(self, inside: str) -> Path:
        """Where a path of this host's own (under /etc, /home, /srv) lives on the
        machine, for the test to write or read it from outside."""
        for own in _OWN_DIRS:
            mount = "/" + own
            if inside == mount or inside.startswith(mount + "/"):
                return self.root / own / inside[len(mount):].lstrip("/")
        raise ValueError(f"{inside} is not one of {self.name}'s own paths")

    def _argv(self, argv: Sequence[str], user: str | None) -> list[str]:
        enter = ["nsenter", f"--target={self.anchor_pid}", "--net", "--mount", "--uts", "--"]
        if user is None:
            return [*enter, *argv]
        uid = self.users[user]
        return [*enter, "setpriv", f"--reuid={uid}", f"--regid={uid}", "--init-groups",
                "--inh-caps=-all", "--", *argv]

    def env(self, user: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
        home = f"/home/{user}" if user else "/root"
        return {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": home,
                "LANG": "C.UTF-8", "USER": user or "root", **(extra or {})}

    def run(self, argv: Sequence[str], *, user: str | None = None,
            env: dict[str, str] | None = None, timeout: float = 300, cwd: str | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on this host, as root or as ``user``; never raises on its exit code."""
        return subprocess.run(self._argv(argv, user), env=self.env(user, env),
                              capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=cwd or "/", input=input)

    def popen(self, argv: Sequence[str], *, user: str | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """Start ``argv`` on this host (a service); its own process group, stdout piped."""
        return subprocess.Popen(self._argv(argv, user), env=self.env(user, env), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                                start_new_session=True)


class Site:
    """The hosts of one simulated site, on one bridge; :meth:`close` removes all of it."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.tag = f"{_PREFIX}{os.getpid()}-{secrets.token_hex(2)}"
        self.switch = f"{self.tag}-sw"
        self.hosts: dict[str, SiteHost] = {}
        self._netns: list[str] = []
        self._services: list[subprocess.Popen[str]] = []
        self._next_uid = _FIRST_UID
        self._closed = False
        atexit.register(self.close)
        self._add_netns(self.switch)
        _ip("link", "add", "br0", "type", "bridge", netns=self.switch)
        _ip("link", "set", "br0", "up", netns=self.switch)

    def _add_netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._netns.append(name)
        _ip("link", "set", "lo", "up", netns=name)

    def add_host(self, name: str, role: str, users: Sequence[str] = ()) -> SiteHost:
        """A new host on the bridge, with ``users`` as real accounts of its own."""
        index = len(self.hosts) + 1
        netns = f"{self.tag}-{index}"
        self._add_netns(netns)
        # Interface names are at most 15 characters: the site's short id and the host's index.
        short = f"as{self.tag[-4:]}{index}"
        _ip("link", "add", f"{short}a", "type", "veth", "peer", "name", f"{short}b")
        _ip("link", "set", f"{short}a", "netns", netns)
        _ip("link", "set", f"{short}b", "netns", self.switch)
        _ip("link", "set", f"{short}b", "master", "br0", "up", netns=self.switch)
        _ip("link", "set", f"{short}a", "name", "eth0", netns=netns)
        address = f"{SUBNET}.{index}"
        _ip("addr", "add", f"{address}/24", "dev", "eth0", netns=netns)
        _ip("link", "set", "eth0", "up", netns=netns)
        root = self.base / name
        root.mkdir()
        shutil.copytree("/etc", root / "etc", symlinks=True)
        for own in _OWN_DIRS:
            (root / own).mkdir(exist_ok=True)
        (root / "etc" / "abhed").mkdir(mode=0o755, exist_ok=True)
        accounts = {u: self._uid() for u in users}
        passwd = [line for line in Path("/etc/passwd").read_text().splitlines()
                  if int(line.split(":")[2]) < 1000 or line.startswith("nobody:")]
        group = [line for line in Path("/etc/group").read_text().splitlines()
                 if int(line.split(":")[2]) < 1000 or line.startswith("nogroup:")]
        for user, uid in accounts.items():
            passwd.append(f"{user}:x:{uid}:{uid}:{user} on {name}:/home/{user}:/bin/sh")
            group.append(f"{user}:x:{uid}:")
            home = root / "home" / user
            home.mkdir(mode=0o700)
            os.chown(home, uid, uid)
        (root / "etc" / "passwd").write_text("\n".join(passwd) + "\n")
        (root / "etc" / "group").write_text("\n".join(group) + "\n")
        (root / "etc" / "hostname").write_text(name + "\n")
        self._write_hosts(root, name, address)
        binds = [f"mount --bind {root / own} /{own}" for own in _OWN_DIRS]
        binds += ["mount -t tmpfs -o mode=0755 tmpfs /run",
                  "mount -t tmpfs -o mode=1777 tmpfs /tmp"]
        script = "set -e; " + "; ".join(binds) + f"; hostname {name}; echo $$; exec sleep infinity"
        anchor = subprocess.Popen(
            ["ip", "netns", "exec", netns, "unshare", "--mount", "--uts", "--propagation",
             "private", "--fork", "--", "sh", "-c", script],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert anchor.stdout is not None
        first = anchor.stdout.readline().strip()
        if not first.isdigit():
            anchor.kill()
            raise RuntimeError(f"host {name} did not start: {first} {anchor.stderr.read() if anchor.stderr else ''}")
        host = SiteHost(name, role, address, netns, root, anchor, int(first), accounts)
        self.hosts[name] = host
        for other in self.hosts.values():
            self._write_hosts(other.root, other.name, other.address)
        return host

    def _write_hosts(self, root: Path, name: str, address: str) -> None:
        lines = ["127.0.0.1 localhost", f"{address} {name}"]
        lines += [f"{h.address} {h.name}" for h in self.hosts.values() if h.name != name]
        # Rewritten in place: the file is bind-mounted, a rename would leave the mount behind.
        with open(root / "etc" / "hosts", "w") as fh:
            fh.write("\n".join(lines) + "\n")

    def _uid(self) -> int:
        uid, self._next_uid = self._next_uid, self._next_uid + 1
        return uid

    def service(self, host: SiteHost, argv: Sequence[str], *, user: str | None = None,
                env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """A long-running process on ``host``, stopped (its whole group) by :meth:`close`."""
        proc = host.popen(argv, user=user, env=env)
        self._services.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[str], *, timeout_s: float = 60) -> int:
        """Stop a service (SIGTERM to its group, SIGKILL after ``timeout_s``): its exit code.
        A model host restarted mid-session (the serving issue) is ``stop`` then ``service``."""
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(30)
        return proc.returncode

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for proc in [*self._services, *(h.anchor for h in self.hosts.values())]:
            if proc.poll() is None:
                _signal_group(proc, signal.SIGKILL)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        for host in self.hosts.values():
            # The anchor's child (in its own namespaces) dies with the group; be sure.
            try:
                os.kill(host.anchor_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in reversed(self._netns):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30,
                           check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def _signal_group(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``proc`` leads (a service's whole tree); a group
    that has already gone is no error."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def build_site(agent_hosts: dict[str, Sequence[str]], model_hosts: Sequence[str] = ("model-1",),
               base: Path | None = None) -> Site:
    """A site: ``model_hosts`` (role model, no users) then ``agent_hosts`` (name -> users)."""
    sweep_stale()
    if base is None:
        # Not under /tmp: engineers' tools there would see the machine's /tmp, not a host's.
        base = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    site = Site(base)
    try:
        for name in model_hosts:
            site.add_host(name, "model")
        for name, users in agent_hosts.items():
            site.add_host(name, "agent", users)
    except BaseException:
        site.close()
        raise
    return site


ENGINEERS = {"eng-1": ("ana", "bob"), "eng-2": ("cai", "dee")}


@dataclass(frozen=True)
class SiteVllm:
    host: SiteHost
    base_url: str  # on the model host's loopback
    served: str
    proc: subprocess.Popen[str]  # ``abhed serve``: ``Site.stop`` it to take the host down


def start_vllm(site: Site, host: SiteHost, *, cpus: str | None = None,
               listen: str | None = None, port: int | None = None,
               weights: Path | None = None) -> SiteVllm:
    """``abhed serve`` on ``host`` (as root, its /srv/vllm home); waits for its URL.
    ``cpus`` pins it (``taskset -c``), so two model hosts on one machine do not share cores.
    ``listen``: the address vLLM listens on (default the host's loopback); the host's site
    address when a router on another host reaches it.  ``port``: the one it had, for a host
    restarted behind a router that knows it by its URL.  ``weights``: the model directory
    served as ``tiny`` (default the tests' tiny model; :func:`wired_model` for a site whose
    hosts are installed by the installer, whose gates need a real tool call)."""
    python = vllm_python()
    entry = entry_for(weights if weights is not None else tiny_model(python))
    port = port if port is not None else free_port()
    home = host.path("/srv/vllm")
    write_home(home, python, entry, port)
    pin = ["taskset", "-c", cpus] if cpus is not None else []
    where = ["--host", listen] if listen is not None else []
    proc = site.service(host, [*pin, sys.executable, "-m", "cli", "serve", "--model", "tiny",
                               *where], env={"ABHED_HOME": "/srv/vllm"})
    url, _ = served_url(proc, home, f" on {host.name}")
    return SiteVllm(host, url, SERVED, proc)
