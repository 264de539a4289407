"""The model server as a service: a systemd unit where systemd runs, a run script always.

Each release carries ``run-model-server``, a shell script that execs the
release's declared model-server command with the offline environment.  When
systemd is the init system (``/run/systemd/system`` exists, as
``sd_booted()`` checks), ``abhed-model.service`` is written to run
``PREFIX/current/run-model-server``, so switching ``current`` and restarting
the unit moves the service to another release.  Without systemd the operator
gets a note saying how to start the script under their own supervisor.
``ABHED_INSTALLER_SYSROOT`` points detection and unit paths at a fake root;
with a sysroot other than ``/``, systemctl is never called.

The model service's two doors (docs/model-service.md) are units too, run as
root from the current release's ``abhed``: ``abhed-model-relay.service`` on a
host where engineers work (the Unix socket ``/run/abhed/model.sock``, the
host's credential, the enrolled engineers, the site's model endpoints) and
``abhed-model-front.service`` on a model host (TLS on the site network, the
revocation list, vLLM on loopback behind the key in ``VLLM_KEY``, the request
record in ``PREFIX/data/model-requests.sqlite``).  With several model hosts
(``replicas``: each host's vLLM root URL) the model host that runs the front also runs
``abhed-model-router.service``, the vLLM project's router over them on loopback, and
the front forwards to it, checking every replica against the release's catalog entry
before it takes traffic (docs/model-service.md).  When that key file exists
the run script hands it to vLLM as ``VLLM_API_KEY`` (never in argv), so the
local model port answers no one but the front.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from foundation import ROUTER_PORT, router_argv

from ._layout import Layout, atomic_write
from ._preflight import sysroot
from ._proc import OFFLINE_ENV, child_env

if TYPE_CHECKING:
    from ._roles import ReplicaPlan

__all__ = ["CHECK_SCRIPT", "DEFAULT_PORT", "FRONT_PORT", "FRONT_UNIT", "PORT_MARK", "RELAY_SOCKET", "RELAY_UNIT",
           "ROUTER_PORT", "ROUTER_UNIT", "ROUTER_VENV", "RUN_SCRIPT", "UNIT_NAME", "front_unit_text",
           "relay_argv", "relay_unit_text", "render_check_script", "render_run_script", "router_python", "router_unit_text",
           "relay_upstreams", "role_units", "systemctl", "systemd_present", "unit_path", "unit_text",
           "vllm_key_path", "write_units"]

UNIT_NAME = "abhed-model.service"
RUN_SCRIPT = "run-model-server"
CHECK_SCRIPT = "check-model-host"
DEFAULT_PORT = 8000
PORT_MARK = "\x00port\x00"
RELAY_UNIT = "abhed-model-relay.service"
FRONT_UNIT = "abhed-model-front.service"
RELAY_SOCKET = "/run/abhed/model.sock"
FRONT_PORT = 8443
ROUTER_UNIT = "abhed-model-router.service"
ROUTER_VENV = "router-venv"


def vllm_key_path(layout: Layout) -> Path:
    """The key vLLM demands and only the front (root) reads."""
    return layout.state_dir / "credential" / "vllm.key"


def systemd_present() -> bool:
    return (sysroot() / "run/systemd/system").is_dir()


def unit_path() -> Path:
    return sysroot() / "etc/systemd/system" / UNIT_NAME


def _shell_arg(arg: str) -> str:
    pieces = arg.split(PORT_MARK)
    return '"$port"'.join(shlex.quote(p) if p else "" for p in pieces) or "''"


def render_run_script(version: int, argv: list[str], env: dict[str, str], layout: Layout,
                      port: int = DEFAULT_PORT) -> str:
    lines = [
        "#!/bin/sh",
        f"# Abhed release {version}: starts its model server.  Written by abhed-installer;",
        "# `abhed-installer check` reports any edit.  Port: $ABHED_MODEL_PORT (default "
        f"{port}).",
        "set -e",
        f'ABHED_HOME="${{ABHED_HOME:-{layout.data}}}"',
        "export ABHED_HOME",
    ]
    for k, v in sorted({**OFFLINE_ENV, **env}.items()):
        lines.append(f"{k}={shlex.quote(v)}; export {k}")
    key = shlex.quote(str(vllm_key_path(layout)))
    lines += [f"# With a model service front, vLLM answers only the holder of {key}.",
              f'if [ -f {key} ]; then VLLM_API_KEY="$(cat {key})"; export VLLM_API_KEY; fi']
    lines.append(f'port="${{ABHED_MODEL_PORT:-{port}}}"')
    lines.append("exec " + " ".join(_shell_arg(a) for a in argv))
    return "\n".join(lines) + "\n"


def render_check_script(version: int, argv: list[str], layout: Layout,
                        port: int = DEFAULT_PORT) -> str:
    """``check-model-host``: the release's host check (``abhed serve --check-host``,
    models._host_check) against its own vLLM on loopback, once it answers.  Run by
    ``abhed-model.service`` after each start (``ExecStartPost``): a host that comes back
    (crash, upgrade, rollback) is checked once, before the router's health check (vLLM's
    ``/health``, every 5 s) can see it, and never on every probe.  A refusal fails the
    start, so systemd stops vLLM and the router keeps routing around it.  Each outcome is
    appended to ``PREFIX/logs/host-check.log`` (and the journal)."""
    key = shlex.quote(str(vllm_key_path(layout)))
    log = shlex.quote(str(layout.logs / "host-check.log"))
    return "\n".join([
        "#!/bin/sh",
        f"# Abhed release {version}: is this model host serving what the site declared?",
        f"# Run by {UNIT_NAME} after each start; written by abhed-installer.",
        f'ABHED_HOME="${{ABHED_HOME:-{layout.data}}}"',
        "export ABHED_HOME",
        f'if [ -f {key} ]; then VLLM_API_KEY="$(cat {key})"; export VLLM_API_KEY; fi',
        f'port="${{ABHED_MODEL_PORT:-{port}}}"',
        "if out=$(" + " ".join(_shell_arg(a) for a in argv) + " 2>&1); then status=ok; "
        "else status=refused; fi",
        f'printf \'%s %s %s\\n\' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$status" "$out" >> {log} '
        "|| true",
        'printf \'%s\\n\' "$out"',
        '[ "$status" = ok ]',
    ]) + "\n"


def unit_text(layout: Layout, replica: ReplicaPlan | None = None) -> str:
    """``abhed-model.service``: vLLM reachable from loopback only; on a model host behind
    another host's router (``replica``), also from this host's own address and the
    router host's addresses, no other (the key in ``vllm.key`` is demanded as well)."""
    check = shlex.quote(f"{layout.current}/{CHECK_SCRIPT}")
    if replica is None:
        network = "# The appliance needs no network beyond loopback.\nIPAddressAllow=localhost"
    else:
        allowed = " ".join(dict.fromkeys([replica.address, *replica.allow]))
        network = (f"# Behind the router on {replica.router_host}: loopback, this host's "
                   f"{replica.address} and the router's host only.\n"
                   f"IPAddressAllow=localhost {allowed}")
    return f"""[Unit]
Description=Abhed model server (the current release under {layout.prefix})
Documentation=file://{layout.prefix}/current/bundle/docs
After=local-fs.target

[Service]
Type=simple
ExecStart={layout.current}/{RUN_SCRIPT}
# Checked once per start (installer._services.render_check_script); a release from before
# the check has no script and is not checked.
ExecStartPost=/bin/sh -c 'if [ -x {check} ]; then exec {check}; fi'
Environment=ABHED_HOME={layout.data}
Restart=on-failure
RestartSec=5
TimeoutStartSec=900
IPAddressDeny=any
{network}

[Install]
WantedBy=multi-user.target
"""


def _door_unit(what: str, layout: Layout, argv: list[str]) -> str:
    return f"""[Unit]
Description=Abhed model {what} (the current release under {layout.prefix})
Documentation=file://{layout.prefix}/current/bundle/docs
After=network-online.target

[Service]
Type=simple
ExecStart={" ".join(shlex.quote(a) for a in [str(layout.bin / "abhed"), *argv])}
Restart=on-failure
RestartSec=2
RuntimeDirectory=abhed
RuntimeDirectoryPreserve=yes

[Install]
WantedBy=multi-user.target
"""


def relay_argv(layout: Layout, upstreams: Sequence[str], *, socket: str = RELAY_SOCKET,
               gate: bool = False) -> list[str]:
    """``abhed``'s arguments for a relay: the host's (its unit), or with ``gate`` the health
    gate's own (``installer._gate_relay``: no engineers, only the gate's uid)."""
    cred = layout.state_dir / "credential"
    argv = ["model-relay", "--socket", socket, "--ca", str(cred / "ca.pem"),
            "--credential", str(cred / "host.pem")]
    argv += ["--gate"] if gate else ["--engineers", str(layout.state_dir / "engineers.json")]
    for u in upstreams:
        argv += ["--upstream", u]
    return argv


def relay_unit_text(layout: Layout, upstreams: list[str]) -> str:
    """The relay on a host where engineers work; ``upstreams``: the site's model fronts."""
    return _door_unit("relay", layout, relay_argv(layout, upstreams))


def front_unit_text(layout: Layout, port: int = FRONT_PORT, listen: str = "0.0.0.0",
                    replicas: Sequence[str] = (), catalog: str | None = None) -> str:
    """The front on a model host, before vLLM on loopback (DEFAULT_PORT), or before the
    router (ROUTER_PORT) over ``replicas``; ``catalog``: what each host must serve."""
    cred = layout.state_dir / "credential"
    upstream = f"http://127.0.0.1:{ROUTER_PORT if replicas else DEFAULT_PORT}"
    argv = ["model-front", "--host", listen, "--port", str(port), "--ca", str(cred / "ca.pem"),
            "--credential", str(cred / "host.pem"), "--crl", str(cred / "crl.pem"),
            "--upstream", upstream, "--api-key-file", str(vllm_key_path(layout)),
            "--record", str(layout.data / "model-requests.sqlite")]
    if catalog is not None:
        argv += ["--catalog", catalog]
    for r in replicas:
        argv += ["--replica", r]
    return _door_unit("front", layout, argv)


def router_python(layout: Layout) -> str:
    """The current release's router venv: vllm-router's wheels, which the bundle carries
    for the model role when the site declares a router, in a venv of their own (their pins
    are not vLLM's)."""
    return str(layout.current / ROUTER_VENV / "bin" / "python")


def router_unit_text(layout: Layout, replicas: Sequence[str], policy: str = "cache_aware") -> str:
    """The router on the model host that runs the front: ``foundation.router_argv`` (the
    command ``abhed serve --dry-run`` prints too), run by the release's router venv
    (:func:`router_python`), on loopback: only the front reaches it."""
    argv = router_argv(router_python(layout), replicas, policy=policy)
    return f"""[Unit]
Description=Abhed model router over {len(replicas)} model hosts (the current release under {layout.prefix})
Documentation=file://{layout.prefix}/current/bundle/docs
After=network-online.target
Before={FRONT_UNIT}

[Service]
Type=simple
ExecStart={" ".join(shlex.quote(a) for a in argv)}
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
"""


def relay_upstreams(endpoints: Sequence[str]) -> list[str]:
    """The relay's upstreams: the site's declared model endpoints (the model hosts' fronts,
    ``https://model-1:8443/v1``) without their ``/v1``, which the caller's path carries.
    A host of role ``all`` with none declared relays to its own front."""
    if not endpoints:
        return [f"https://localhost:{FRONT_PORT}"]
    return [u.rstrip("/").removesuffix("/v1") for u in endpoints]


def role_units(layout: Layout, role: str, endpoints: Sequence[str],
               replicas: Sequence[str] = (), catalog: str | None = None,
               policy: str = "cache_aware", *,
               replica: ReplicaPlan | None = None) -> dict[str, str]:
    """The units a host of ``role`` runs, by name: the model server and its front on a
    model host, the relay where engineers work, all three on a host of role ``all``.
    ``replicas`` (several model hosts' vLLM): the router too, the front before it.
    ``replica`` (this host serves behind another's router): no front here, since the
    engineers' hosts reach the front on the router's host only (bundle._roles)."""
    units: dict[str, str] = {}
    if role in ("model", "all"):
        units[UNIT_NAME] = unit_text(layout, replica)
        if replica is None:
            units[FRONT_UNIT] = front_unit_text(layout, replicas=replicas, catalog=catalog)
        if replicas:
            units[ROUTER_UNIT] = router_unit_text(layout, replicas, policy)
    if role in ("agent", "all"):
        units[RELAY_UNIT] = relay_unit_text(layout, relay_upstreams(endpoints))
    return units


def write_units(layout: Layout, role: str, endpoints: Sequence[str],
                replicas: Sequence[str] = (), catalog: str | None = None,
                policy: str = "cache_aware", *,
                replica: ReplicaPlan | None = None) -> list[tuple[Path, bytes | None]]:
    """Write the role's units (:func:`role_units`); each one's path and previous content
    (for undo).  A router or front unit left from a release that ran one, where this one
    does not (:data:`MOVABLE_UNITS`), is removed (its previous content kept for undo), so
    nothing points at it."""
    written: list[tuple[Path, bytes | None]] = []
    units = role_units(layout, role, endpoints, replicas, catalog, policy, replica=replica)
    for name in stale_units(units):
        stale = unit_path().parent / name
        written.append((stale, stale.read_bytes()))
        stale.unlink()
    for name, text in units.items():
        path = unit_path().parent / name
        try:
            old: bytes | None = path.read_bytes()
        except FileNotFoundError:
            old = None
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text.encode())
        written.append((path, old))
    return written


MOVABLE_UNITS = (ROUTER_UNIT, FRONT_UNIT)
"""The units a model host runs or not by the site's router: the router on its host, the
front everywhere but behind it."""


def stale_units(wanted: dict[str, str]) -> list[str]:
    """The :data:`MOVABLE_UNITS` on disk that ``wanted`` (the release's units) leaves out,
    on a model host (one that runs the model server)."""
    if UNIT_NAME not in wanted:
        return []
    where = unit_path().parent
    return [n for n in MOVABLE_UNITS if n not in wanted and (where / n).is_file()]


def write_unit(layout: Layout) -> tuple[Path, bytes | None]:
    """Write the unit; returns its path and previous content (for undo)."""
    path = unit_path()
    try:
        old: bytes | None = path.read_bytes()
    except FileNotFoundError:
        old = None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, unit_text(layout).encode())
    return path, old


def systemctl(*args: str) -> str | None:
    """Run systemctl on the real root; None when there is none to talk to."""
    if str(sysroot()) != "/" or not systemd_present():
        return None
    exe = shutil.which("systemctl")
    if exe is None:
        return None
    out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120,
                         env=child_env(), check=False)
    return (out.stdout + out.stderr).strip() or f"exit {out.returncode}"
