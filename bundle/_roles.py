"""Hosts by role: one signed bundle for the whole site, each host installing what its role needs.

A site names the roles its hosts take (``[roles] hosts`` in the site or build spec):

* ``model``: serves the model: vLLM's wheels (every wheel of the bundle), the weights,
  the model-server declaration; and the agent's own wheel, because the model host's
  health gate proves the model with the agent's probes (docs/installer.md).  No microVM
  image and no site settings: nobody works on a model host.
* ``agent``: where engineers work: the agent's wheel and the wheels it needs (its
  dependency closure, read from the wheels' own metadata), the microVM image, the
  site's settings and files, the model's declaration and the catalog the settings name.
  No weights, no vLLM: its provider points at the site's model hosts,
  ``[roles] model_endpoints``.
* ``all``: both on one host (every member), as before roles existed.

The manifest's ``roles`` entry records, signed, which members (and references) each
role installs; a bundle without one is ``all`` only.  Everything here is decided at
build time, so the installer only reads the lists.
"""

from __future__ import annotations

import email.parser
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from foundation import replica_root, service_url

from ._errors import SpecError

__all__ = ["RELAY_PROVIDER", "RELAY_SOCKET", "ROLE_NAMES", "RolesSpec", "SiteRouter",
           "agent_closure", "check_endpoint", "check_provider_endpoints", "check_role_names",
           "check_roles", "endpoint_address", "with_relay_provider"]

ROLE_NAMES = ("agent", "model", "all")
MAX_ENDPOINTS = 32
MAX_REPLICAS = 32
_HOSTNAME = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$"


def check_role_names(hosts: Sequence[Any]) -> tuple[str, ...]:
    """The roles a site declares, each known, none twice; ValueError naming the bad one."""
    if not hosts:
        raise ValueError("name at least one role: agent, model or all")
    for role in hosts:
        if not isinstance(role, str) or role not in ROLE_NAMES:
            raise ValueError(f"unknown role {role!r}: the roles are agent (engineers' hosts), "
                             "model (the model hosts) and all (both on one host)")
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"a role is named twice in {list(hosts)}")
    return tuple(hosts)


def check_endpoint(url: str) -> str:
    """A model endpoint: foundation's one rule for a site's service URLs.  Returned
    without a trailing slash (as the agent's provider normalises base URLs)."""
    service_url(url, "model endpoint", "http://10.0.0.5:8000/v1")
    return url.rstrip("/")


def endpoint_address(url: str) -> tuple[str, int]:
    """(host, port) an endpoint URL names; the scheme's port when it names none."""
    parts = urlsplit(check_endpoint(url))
    assert parts.hostname is not None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def _provider_urls(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each provider's (name, URL) that the agent dials itself.  A provider with a
    ``unix_socket`` goes through the host's model relay (docs/model-service.md), whose
    upstreams are the model endpoints; its ``base_url`` only names the path."""
    found: list[tuple[str, str]] = []
    for p in settings.get("custom_providers") or []:
        if not isinstance(p, dict) or p.get("unix_socket"):
            continue
        urls = p.get("base_url")
        for u in [urls] if isinstance(urls, str) else urls if isinstance(urls, list) else []:
            if isinstance(u, str):
                found.append((str(p.get("name")), u.rstrip("/")))
    return found


def check_provider_endpoints(settings: Mapping[str, Any], endpoints: Iterable[str],
                             where: str) -> None:
    """On an agent host the provider must point at the site's declared model endpoints:
    the gate reaches those and nothing else.  SpecError names a provider URL that is not
    one of them."""
    declared = {check_endpoint(e) for e in endpoints}
    for name, url in _provider_urls(settings):
        if url not in declared:
            raise SpecError(f"{where}: provider {name!r} points at {url}, which is not one of "
                            f"[roles] model_endpoints ({', '.join(sorted(declared))}): an agent "
                            "host reaches the declared model endpoints and nothing else; add it "
                            "there or point the provider at one")


RELAY_SOCKET = "/run/abhed/model.sock"
"""Where each agent host's model relay listens (as ``installer._services.RELAY_SOCKET``:
tests/bundle/test_roles.py keeps the two equal; bundle does not import the installer)."""
RELAY_PROVIDER = "site"


def with_relay_provider(settings: Mapping[str, Any], endpoints: Sequence[str],
                        where: str) -> dict[str, Any]:
    """The settings an agent host's engineers get, with the provider that goes through the
    host's model relay added (docs/model-service.md), so the operator never writes it.

    Added when every declared endpoint is ``https://`` (a model host's front, which only a
    relay holding the host's credential can reach) and no provider names a ``unix_socket``
    already (the operator's own is kept as written): ``site``, ``base_url``
    ``http://model-service/v1`` (only the path: the relay holds TLS), ``unix_socket`` the
    relay's.  It becomes the default provider unless the settings name one.  Plain
    ``http://`` endpoints (a model server with no front, e.g. one workstation's) are dialled
    by the operator's own provider, as before.  SpecError: a provider of the operator's is
    already called ``site``."""
    out = dict(settings)
    if not endpoints or any(not check_endpoint(e).startswith("https://") for e in endpoints):
        return out
    providers = [p for p in out.get("custom_providers") or [] if isinstance(p, dict)]
    if any(p.get("unix_socket") for p in providers):
        return out
    if any(p.get("name") == RELAY_PROVIDER for p in providers):
        raise SpecError(f"{where}: provider {RELAY_PROVIDER!r} is the one the bundle adds for "
                        "the host's model relay ([roles] model_endpoints are the model hosts' "
                        "fronts, reached through the relay only); rename yours, or leave it "
                        "out and set the relay's model in a provider of another name")
    relay = {"name": RELAY_PROVIDER, "api": "openai", "base_url": "http://model-service/v1",
             "unix_socket": RELAY_SOCKET}
    out["custom_providers"] = [*(out.get("custom_providers") or []), relay]
    out.setdefault("default_provider", RELAY_PROVIDER)
    return out


class SiteRouter(BaseModel):
    """``[roles.router]``: one model served by several model hosts behind the vLLM project's
    router (docs/model-service.md, *Several model hosts*).  Signed in the manifest's
    ``roles``; the installer writes the router's unit, and points the front at it, on the
    model host named ``host`` only."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    host: str = Field(
        pattern=_HOSTNAME, max_length=253,
        description="the model host that runs the router and the front before it: its name "
                    "as `hostname` (or `hostname -f`) prints it there")
    replicas: tuple[str, ...] = Field(
        min_length=2, max_length=MAX_REPLICAS,
        description="each model host's vLLM root URL as the router's host reaches it "
                    "(http://10.0.0.6:8000); the router host's own vLLM is one of them")
    policy: Literal["round_robin", "power_of_two", "cache_aware"] = Field(
        default="cache_aware", description="how the router picks a host; cache_aware keeps a "
        "session on the host holding its prefix cache")


def check_roles(hosts: Sequence[Any], endpoints: Sequence[Any],
                router: SiteRouter | None) -> tuple[tuple[str, ...], tuple[str, ...],
                                                    SiteRouter | None]:
    """The one check of ``[roles]``, for the site or build spec and for the signed
    manifest alike: ValueError naming the field.  Returns the roles, the endpoints without
    a trailing slash and the router with its replicas as vLLM roots (what a spec keeps; the
    manifest's were written that way, so checking them again changes nothing)."""
    roles = check_role_names(hosts)
    urls = tuple(check_endpoint(u) for u in endpoints)
    twice = sorted({u for u in urls if urls.count(u) > 1})
    if twice:
        raise ValueError(f"model_endpoints lists {twice[0]} twice")
    if "agent" in roles and not urls:
        raise ValueError("role 'agent' needs model_endpoints: the model service its "
                         "provider points at (e.g. [\"http://10.0.0.5:8000/v1\"])")
    if router is None:
        return roles, urls, None
    if not {"model", "all"} & set(roles):
        raise ValueError(f"[roles.router] puts the vLLM router before several model hosts, but "
                         f"hosts ({', '.join(roles)}) names no model role: add \"model\" to "
                         "hosts, or leave [roles.router] out")
    try:
        replicas = tuple(replica_root(u) for u in router.replicas)
    except ValueError as exc:
        raise ValueError(f"router.replicas: {exc}") from None
    twice = sorted({r for r in replicas if replicas.count(r) > 1})
    if twice:
        raise ValueError(f"router.replicas lists {twice[0]} twice: each model host once")
    fronts = {u.removesuffix("/v1") for u in urls}
    for r in replicas:
        if r in fronts:
            raise ValueError(f"router.replicas: {r} is one of model_endpoints (a model host's "
                             "front, where agent hosts connect), not a model host's vLLM: the "
                             "router would send requests back to the front")
    for u in urls:
        host = urlsplit(u).hostname or ""
        if host.casefold() != router.host.casefold():
            raise ValueError(f"model_endpoints: {u} is on {host}, but router.host is "
                             f"{router.host}: with a router, agent hosts reach the front on "
                             "the router's host, and the router balances (one mechanism, not "
                             "the router and the client's own rotation both)")
    return roles, urls, router.model_copy(update={"replicas": replicas})


def _requires(path: Path) -> list[str]:
    """A wheel's ``Requires-Dist`` lines, from its METADATA."""
    try:
        with zipfile.ZipFile(path) as zf:
            meta = [n for n in zf.namelist()
                    if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if not meta:
                return []
            with zf.open(meta[0]) as fh:
                headers = email.parser.BytesParser().parsebytes(fh.read(4 << 20),
                                                                headersonly=True)
    except zipfile.BadZipFile:
        raise SpecError(f"{path} is not a valid wheel (bad zip)") from None
    return [str(r) for r in headers.get_all("Requires-Dist") or []]


def agent_closure(agent_wheel: Path, wheels: Mapping[str, Path], *, python: str,
                  arch: str) -> set[str]:
    """The normalised names of the wheels the agent needs on the target: its
    ``Requires-Dist`` followed through the bundle's wheels, markers evaluated for the
    target's Python and CPU (``packaging``, PyPA's own reading of them), extras followed.

    A requirement the bundle carries no wheel for is left out here as it is for the whole
    venv (the CPU rule drops some by design); the installer's ``pip check`` still names a
    wheel that is truly missing.
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    env = {"python_version": python, "python_full_version": f"{python}.0",
           "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
           "platform_machine": arch, "implementation_name": "cpython",
           "platform_python_implementation": "CPython"}
    seen: set[tuple[str, str]] = set()
    needed: set[str] = set()
    todo: list[tuple[Path, str]] = [(agent_wheel, "")]
    while todo:
        path, extra = todo.pop()
        for line in _requires(path):
            try:
                req = Requirement(line)
            except InvalidRequirement as exc:
                raise SpecError(f"{path.name}: Requires-Dist {line!r} cannot be read ({exc})") \
                    from None
            if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
                continue
            name = canonicalize_name(req.name)
            if name not in wheels:
                continue
            needed.add(name)
            for want in ("", *sorted(req.extras)):
                if (name, want) not in seen:
                    seen.add((name, want))
                    todo.append((wheels[name], want))
    return needed


class RolesSpec(BaseModel):
    """``[roles]`` of a site or build spec (docs/bundle.md, *Roles*)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    hosts: tuple[str, ...] = Field(
        default=("all",), max_length=len(ROLE_NAMES),
        description="the roles the site's hosts take: agent, model, all (both on one host)")
    model_endpoints: tuple[str, ...] = Field(
        default=(), max_length=MAX_ENDPOINTS,
        description="the model service's URLs (e.g. http://10.0.0.5:8000/v1) that agent "
                    "hosts' provider points at; their gate may reach these and nothing else")
    router: SiteRouter | None = Field(
        default=None, description="[roles.router]: several model hosts behind the vLLM "
        "router, on the model host it names")

    @model_validator(mode="after")
    def _checked(self) -> RolesSpec:
        # Normalised in place (frozen: pydantic's own fields dict, set once, here).
        _, urls, router = check_roles(self.hosts, self.model_endpoints, self.router)
        object.__setattr__(self, "model_endpoints", urls)
        object.__setattr__(self, "router", router)
        return self
