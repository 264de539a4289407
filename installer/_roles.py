"""Which role this host takes, and what that means for the steps (docs/installer.md, *Roles*).

One signed bundle serves the whole site; its manifest lists what each role installs
(``bundle._roles``).  A host's role is chosen once, at install: ``--role``, else the
bundle's only role, else refused (the operator must say).  It is kept in the state file
and in each release's ``release.json``; an upgrade keeps it, and takes another only with
``--switch-role`` (recorded), so a fleet tool that runs the same command everywhere can
never turn an engineer's host into a model host by accident.

An upgrade whose changes do not touch the host's role (every member the role installs
has the same content as in the current release) changes nothing: "nothing to do for
role model", exit 0.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import UsageError

if TYPE_CHECKING:
    from bundle import Manifest

__all__ = ["ROLES", "ReplicaPlan", "RouterPlan", "choose_role", "release_replica", "release_role",
           "release_router", "replica_plan", "same_for_role", "this_host_names"]

ROLES = ("agent", "model", "all")
"""As ``bundle.ROLE_NAMES`` (tests/installer/test_roles.py keeps the two equal): the
argument parser must not import the bundle package, so ``--help`` starts fast."""


def choose_role(action: str, given: str | None, switch: bool, host: str | None,
                offered: tuple[str, ...]) -> str:
    """The role this install or upgrade takes; UsageError (exit 2) when it cannot say."""
    if given is not None and given not in ROLES:
        shown = repr(given if len(given) <= 40 else given[:40] + "...")
        raise UsageError(f"--role {shown} is not a role: agent (engineers' hosts), model "
                         "(the model hosts) or all (both on one host)")
    if switch and given is None:
        raise UsageError("--switch-role needs --role: the role this host switches to")
    have = ", ".join(offered)
    if action == "install":
        if given is None:
            if len(offered) != 1:
                raise UsageError(f"this bundle serves roles {have}: say which this host takes "
                                 "with --role (agent: engineers work here; model: it serves "
                                 "the model)")
            given = offered[0]
    else:
        now = host or "all"
        if given is not None and given != now and not switch:
            raise UsageError(f"this host is role {now}; the upgrade would make it role {given}. "
                             f"Nothing was changed. Pass --switch-role with --role {given} if "
                             "that is meant (recorded), or leave --role out to keep its role")
        if switch and given == now:
            raise UsageError(f"--switch-role: this host is already role {now}; nothing to "
                             "switch")
        given = given or now
    if given not in offered:
        raise UsageError(f"this bundle serves roles {have}, not {given}: nothing was "
                         "installed. Use the bundle gathered for this site's roles ([roles] "
                         "hosts in the site spec), or --role one of those")
    return given


def release_role(release: Path) -> tuple[str, tuple[str, ...]]:
    """(role, model endpoints) an installed release was installed for; ("all", ()) for a
    release from before roles."""
    try:
        body: Any = json.loads((release / "release.json").read_bytes())
    except (OSError, ValueError):
        return "all", ()
    role = body.get("role") if isinstance(body, dict) else None
    roles = (body.get("manifest") or {}).get("roles") if isinstance(body, dict) else None
    endpoints = tuple(roles.get("model_endpoints") or ()) if isinstance(roles, dict) else ()
    return (role if role in ROLES else "all"), endpoints


@dataclass(frozen=True)
class RouterPlan:
    """The router this host runs for a release: the replicas (vLLM roots), the router's
    policy and the catalog the front checks each replica against (its path under
    ``PREFIX/current``, which the units follow)."""

    replicas: tuple[str, ...]
    policy: str
    catalog: str | None


def this_host_names() -> set[str]:
    """This host's names, case-folded: ``hostname`` and ``hostname -f``, or under a fake
    root (``ABHED_INSTALLER_SYSROOT``) its ``etc/hostname``, so a test can be any host."""
    from ._preflight import sysroot

    root = sysroot()
    if str(root) != "/":
        try:
            names = {(root / "etc/hostname").read_text("utf-8").strip()}
        except OSError:
            names = set()
    else:
        names = {socket.gethostname(), socket.getfqdn()}
    return {n.casefold() for n in names if n} | {n.casefold().split(".")[0] for n in names if n}


def _declared_router(release: Path) -> tuple[str, tuple[str, ...], str] | None:
    """(host, replicas, policy) of ``release``'s signed ``[roles.router]``; None without."""
    try:
        body: Any = json.loads((release / "release.json").read_bytes())
        router = body["manifest"]["roles"]["router"]
        return (str(router["host"]), tuple(str(r) for r in router["replicas"]),
                str(router.get("policy") or "cache_aware"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def release_router(release: Path, role: str, current: Path) -> RouterPlan | None:
    """The router ``release``'s signed manifest declares (``[roles.router]``), when this
    host runs it: role model or all, and this host is ``router.host`` (by name, as
    ``hostname`` prints it: the one declaration every model host reads the same way).
    None elsewhere: those model hosts serve their vLLM to it and run no router."""
    if role not in ("model", "all"):
        return None
    declared = _declared_router(release)
    if declared is None:
        return None
    host, replicas, policy = declared
    if host.casefold() not in this_host_names():
        return None
    from ._descriptor import find_descriptor

    found = find_descriptor(release / "bundle")
    catalog = (str(current / found.parent.relative_to(release) / "abhed-catalog.json")
               if found is not None else None)
    return RouterPlan(replicas, policy, catalog)


@dataclass(frozen=True)
class ReplicaPlan:
    """A model host behind another host's router: its vLLM listens on the address the
    site's ``[roles.router] replicas`` names for it (not loopback), and its unit lets in
    only this host and the router's host (``allow``: ``router.host``'s addresses as they
    resolved at install, kept in ``release.json`` so a rollback writes the same unit)."""

    url: str
    address: str
    port: int
    router_host: str
    allow: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"url": self.url, "address": self.address, "port": self.port,
                "router_host": self.router_host, "allow": list(self.allow)}


_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def _addresses(name: str) -> set[str]:
    """What ``name`` resolves to here (/etc/hosts, DNS), as text; empty when it does not."""
    try:
        found = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return set()
    return {str(info[4][0]).split("%", 1)[0] for info in found}


def _is_loopback(address: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _is_local(address: str) -> bool:
    """Whether ``address`` is one of this host's own: the kernel lets a socket bind it."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def replica_plan(router: tuple[str, tuple[str, ...]] | None, role: str) -> ReplicaPlan | None:
    """This host's part behind the site's router (``(router.host, replicas)``), decided at
    install from the host itself: a model host that is not ``router.host`` and owns the
    address one (plain http) replica URL names (resolved here, then bound: only the kernel knows which
    addresses are this host's).  The router's host must resolve here too, since the unit
    lets in only it; UsageError (nothing installed) when it does not, and when a replica
    names this host by a loopback address (the router would reach itself instead).  None
    on the router's host, an agent host, a site with no router, or a model host that no
    replica names (its vLLM stays on loopback, serving nothing behind the router)."""
    if router is None or role not in ("model", "all"):
        return None
    host, replicas = router
    if host.casefold() in this_host_names():
        return None
    from urllib.parse import urlsplit

    for url in replicas:
        parts = urlsplit(url)
        name = parts.hostname or ""
        if name.casefold() in _LOOPBACK_NAMES or _is_loopback(name):
            continue  # the router's host's own vLLM, as the router reaches it
        mine = sorted(a for a in _addresses(name) if not _is_loopback(a) and _is_local(a))
        if not mine:
            continue
        if parts.scheme != "http":
            raise UsageError(
                f"this host serves {url} behind the router on {host} ([roles.router]), but its "
                "vLLM speaks plain HTTP on the model network (the site's vLLM key and the unit's "
                "address allow-list guard it). Nothing was installed. Declare the replica as "
                f"http://{parts.netloc}")
        allow = tuple(sorted(a for a in _addresses(host) if not _is_loopback(a)))
        if not allow:
            raise UsageError(
                f"this host serves {url} behind the router on {host} ([roles.router]), but "
                f"{host} does not resolve here, so this host's vLLM could not let it in. "
                f"Nothing was installed. Add {host} to /etc/hosts (or the site's DNS) and "
                "install again")
        return ReplicaPlan(url, mine[0], parts.port or (443 if parts.scheme == "https" else 80),
                           host, allow)
    return None


def release_replica(release: Path) -> ReplicaPlan | None:
    """The :class:`ReplicaPlan` the install of ``release`` decided (its ``release.json``)."""
    try:
        body: Any = json.loads((release / "release.json").read_bytes())
        got = body.get("replica")
        if not isinstance(got, dict):
            return None
        return ReplicaPlan(str(got["url"]), str(got["address"]), int(got["port"]),
                           str(got["router_host"]), tuple(str(a) for a in got["allow"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _role_files(manifest: Manifest) -> tuple[dict[str, tuple[str, int]], str | None]:
    # The SBOM lists every component of the site, so it changes with any of them: not a
    # change to this role's files.  The site settings name their own release's directory,
    # so they differ in every version: compared as written, with {release} (the manifest's
    # settings_template_sha256).
    files = manifest.staged_files()
    files.pop(manifest.sbom, None)
    if manifest.site is None or manifest.roles is None:  # a model host has no settings
        return files, None
    files.pop(manifest.site.settings, None)
    return files, manifest.roles.settings_template_sha256


def same_for_role(view: Manifest, current: Path, role: str = "model") -> bool:
    """Does the new bundle, seen as this role (``view``), install exactly what the current
    release holds (same files, same content)?"""
    from bundle import Manifest

    try:
        body = json.loads((current / "release.json").read_bytes())
        installed = Manifest.model_validate_json(json.dumps(body["manifest"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    # A changed router declaration changes a model host's units, not its files.
    router = [m.roles.router if m.roles is not None else None for m in (installed, view)]
    return _role_files(installed) == _role_files(view) and (
        role == "agent" or router[0] == router[1])
