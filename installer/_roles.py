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

__all__ = ["ROLES", "RouterPlan", "choose_role", "release_role", "release_router",
           "same_for_role", "this_host_names"]

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


def release_router(release: Path, role: str, current: Path) -> RouterPlan | None:
    """The router ``release``'s signed manifest declares (``[roles.router]``), when this
    host runs it: role model or all, and this host is ``router.host`` (by name, as
    ``hostname`` prints it: the one declaration every model host reads the same way).
    None elsewhere: those model hosts serve their vLLM to it and run no router."""
    if role not in ("model", "all"):
        return None
    try:
        body: Any = json.loads((release / "release.json").read_bytes())
        router = body["manifest"]["roles"]["router"]
        host, replicas = str(router["host"]), tuple(str(r) for r in router["replicas"])
        policy = str(router.get("policy") or "cache_aware")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host.casefold() not in this_host_names():
        return None
    from ._descriptor import find_descriptor

    found = find_descriptor(release / "bundle")
    catalog = (str(current / found.parent.relative_to(release) / "abhed-catalog.json")
               if found is not None else None)
    return RouterPlan(replicas, policy, catalog)


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
