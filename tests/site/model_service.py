"""The site's model service brought up as an operator does it: installer verbs, role units.

The operator's machine (the test) keeps the site CA (``abhed-installer ca init``)
and issues each host's credential (``ca issue``); each host installs its own
(``credential install``, as root, into ``PREFIX/state/credential``), a model host
its revocation list (``credential crl``), an engineer's host enrolls its users
(``engineer enroll``).  Then each host starts the door its role's unit runs:
the argv is the unit's ``ExecStart`` (``installer._services.role_units``, what
staging writes), with the release's ``abhed`` replaced by this checkout's and,
on the model host, the front's upstream by the suite's shared vLLM (its unit
names the run script's port, 8000).  A host the installer gave a release runs the
units staged under its :data:`SYSROOT` as written instead (:func:`start_staged`).

The installer is the built binary (``scripts/build-installer --cached``, as
tests/installer uses it: ``tests.helpers.installer_argv``), or what ``ABHED_INSTALLER_BIN``
names.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from installer._layout import Layout
from installer._services import FRONT_UNIT, RELAY_SOCKET, RELAY_UNIT, ROUTER_UNIT, role_units
from tests.helpers import ROOT, installer_argv
from tests.site.harness import Site, SiteHost, SiteVllm

__all__ = ["PREFIX", "RECORD", "SYSROOT", "SiteService", "engineer_config", "site_layer",
           "start_model_service", "start_relays", "start_staged"]

PREFIX = "/srv/abhed"  # each host's own /srv
RECORD = f"{PREFIX}/data/model-requests.sqlite"  # the front unit's --record, on a model host
# Each host's root for the installer's systemd units (ABHED_INSTALLER_SYSROOT, with a
# run/systemd/system of its own): there is no systemd in the test, so the units are staged
# there and never started by systemctl; the harness starts their ExecStart itself.
SYSROOT = "/srv/sysroot"
ABHED = [sys.executable, "-m", "cli"]


@dataclass
class SiteService:
    """What :func:`start_model_service` made: the CA's folder, the installer it ran, the
    model front's endpoint and the services (for a test to stop or restart)."""

    ca_dir: Path
    installer: list[str]
    endpoint: str
    outputs: list[str] = field(default_factory=list)  # each verb's output, for the guide
    procs: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    def operator(self, *args: str) -> subprocess.CompletedProcess[str]:
        """An installer verb on the operator's machine (the test's own)."""
        done = subprocess.run([*self.installer, *args], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              check=False)
        self.outputs.append(f"$ abhed-installer {shlex.join(args)}\n{done.stdout}{done.stderr}")
        return done

    def on(self, host: SiteHost, *args: str) -> subprocess.CompletedProcess[str]:
        """An installer verb as root on ``host``."""
        done = host.run([*self.installer, *args], env={"PYTHONPATH": str(ROOT)})
        self.outputs.append(f"root@{host.name}# abhed-installer {shlex.join(args)}\n"
                            f"{done.stdout}{done.stderr}")
        return done


def _exec_start(unit: str) -> list[str]:
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def _door(site: Site, host: SiteHost, argv: list[str]) -> subprocess.Popen[str]:
    proc = site.service(host, [*ABHED, *argv[1:]], env={"PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on"), proc.stderr.read() if proc.stderr else line
    return proc


def start_model_service(site: Site, vllm: SiteVllm | SiteHost, ca_dir: Path,
                        site_name: str = "site-test", *, replicas: Sequence[str] = (),
                        router_python: str | None = None,
                        router_policy: str = "round_robin", relays: bool = True) -> SiteService:
    """The site CA, every host's credential and engineers, the front on the model host and
    a relay on each engineer's host, all through the installer's verbs and units.

    ``replicas`` (vLLM root URLs as the model host reaches them): the router's unit runs
    on ``vllm.host`` too (``router_python``: the Python with vllm-router, for the release's
    venv the unit names), the front before it checks each against ``/srv/vllm``'s catalog.
    ``relays=False``: no relay yet (the engineers' hosts get a release first, whose gate asks
    the front; then :func:`start_relays`).  ``vllm`` a bare model host: no front either (the
    host gets a release first; then :func:`start_staged` runs its units)."""
    model = vllm if isinstance(vllm, SiteHost) else vllm.host
    svc = SiteService(ca_dir, installer_argv(), f"https://{model.address}:8443/v1")
    done = svc.operator("ca", "init", str(ca_dir), "--site", site_name, "--days", "30")
    assert done.returncode == 0, done.stderr
    layout = Layout(Path(PREFIX))
    for host in site.hosts.values():
        host.path(PREFIX).mkdir(mode=0o755, exist_ok=True)
        cred = ca_dir / f"{host.name}.pem"
        done = svc.operator("ca", "issue", str(ca_dir), "--host", host.name, "--role", host.role,
                            "--dns", host.name, "--ip", host.address, "--days", "30",
                            "--out", str(cred))
        assert done.returncode == 0, done.stderr
        carried = host.path(f"/srv/{host.name}.pem")  # carried to the host, then deleted
        carried.write_bytes(cred.read_bytes())
        done = svc.on(host, "credential", "install", f"/srv/{host.name}.pem", "--prefix", PREFIX)
        assert done.returncode == 0, done.stdout + done.stderr
        carried.unlink()
        if host.role == "model":
            host.path("/srv/crl.pem").write_bytes((ca_dir / "crl.pem").read_bytes())
            done = svc.on(host, "credential", "crl", "/srv/crl.pem", "--prefix", PREFIX)
            assert done.returncode == 0, done.stdout + done.stderr
        for user in host.users:
            done = svc.on(host, "engineer", "enroll", user, "--prefix", PREFIX)
            assert done.returncode == 0, done.stdout + done.stderr
    for served in [vllm] if isinstance(vllm, SiteVllm) else []:
        host = served.host  # the front (and the router) on the model host serving
        units = role_units(layout, host.role, [svc.endpoint], replicas,
                           "/srv/vllm/catalog.json" if replicas else None)
        if ROUTER_UNIT in units:
            assert router_python is not None
            argv = _exec_start(units[ROUTER_UNIT])
            argv[0] = router_python
            argv[argv.index("--policy") + 1] = router_policy
            router = site.service(host, argv)
            for pipe in (router.stdout, router.stderr):  # drained: it logs every request
                threading.Thread(target=lambda p=pipe: [None for _ in p], daemon=True).start()
            svc.procs[f"{host.name}-router"] = router
        argv = _exec_start(units[FRONT_UNIT])
        if not replicas:
            argv[argv.index("--upstream") + 1] = served.base_url.removesuffix("/v1")
        host.path(PREFIX + "/data").mkdir(exist_ok=True)
        svc.procs[host.name] = _door(site, host, argv)
    if relays:
        start_relays(site, svc)
    return svc


def start_relays(site: Site, svc: SiteService) -> None:
    """The relay on each engineer's host.  Where the installer staged the host's units (under
    :data:`SYSROOT`: a release installed there), the relay unit's ``ExecStart`` runs as
    written, the release's ``abhed`` and the bundle's endpoints; elsewhere the unit's argv
    for ``svc.endpoint``, with this checkout's ``abhed``."""
    layout = Layout(Path(PREFIX))
    for host in site.hosts.values():
        if host.path(f"{SYSROOT}/etc/systemd/system/{RELAY_UNIT}").is_file():
            svc.procs[host.name] = start_staged(site, host, RELAY_UNIT)
            continue
        units = role_units(layout, host.role, [svc.endpoint])
        if RELAY_UNIT in units:
            svc.procs[host.name] = _door(site, host, _exec_start(units[RELAY_UNIT]))


def start_staged(site: Site, host: SiteHost, unit: str) -> subprocess.Popen[str]:
    """``unit`` as the installer staged it on ``host`` (under :data:`SYSROOT`): its
    ``ExecStart`` as written, with its ``Environment=``.  A door (relay, front) is waited
    for (its first line, ``listening on``); the model server is returned as started (the
    caller drains it and waits for its health)."""
    text = host.path(f"{SYSROOT}/etc/systemd/system/{unit}").read_text()
    env = dict(x.removeprefix("Environment=").split("=", 1) for x in text.splitlines()
               if x.startswith("Environment="))
    proc = site.service(host, _exec_start(text), env=env)
    if unit in (RELAY_UNIT, FRONT_UNIT):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on"), proc.stderr.read() if proc.stderr else line
    return proc


def site_layer(host: SiteHost, served: str, max_retries: int = 1) -> None:
    """The site's signed settings as the installer leaves them on an engineer's host
    (/etc/abhed/site): the host's model relay is the engineers' default provider, so a
    bare ``abhed`` goes through it (docs/model-service.md)."""
    provider = {"name": "site", "api": "openai", "base_url": "http://model-service/v1",
                "unix_socket": RELAY_SOCKET, "model": served,
                "sampling": ["temperature", "seed", "max_tokens"],
                "params": {"temperature": 0, "max_tokens": 64}, "max_retries": max_retries}
    settings = json.dumps({"custom_providers": [provider], "default_provider": "site",
                           "loop": {"max_turns": 4}}, sort_keys=True,
                          separators=(",", ":")).encode()
    where = host.path("/etc/abhed/site")
    where.mkdir(mode=0o755, parents=True)
    (where / "settings.json").write_bytes(settings)
    (where / "origin.json").write_text(json.dumps({
        "format": "abhed-site-origin/1", "site": "site-test", "release": 1,
        "bundle_manifest_sha256": "0" * 64, "signing_key_ids": [],
        "settings_sha256": hashlib.sha256(settings).hexdigest()}))
    for p in (where, where / "settings.json", where / "origin.json"):
        p.chmod(0o755 if p.is_dir() else 0o644)


def engineer_config(host: SiteHost, user: str) -> None:
    """An engineer's own workspace; no provider of their own: the site layer's is theirs."""
    home = host.path(f"/home/{user}")
    (home / ".abhed").mkdir(mode=0o700)
    (home / "ws").mkdir()
    (home / "ws" / "notes.txt").write_text(f"{user}'s notes\n")
    for p in (home / ".abhed", home / "ws", home / "ws" / "notes.txt"):
        shutil.chown(p, host.users[user], host.users[user])


def engineers_listing(host: SiteHost) -> dict[str, object]:
    """The enrolled engineers as the relay reads them."""
    return dict(json.loads(host.path(PREFIX + "/state/engineers.json").read_text()))
