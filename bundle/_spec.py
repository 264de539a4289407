"""The build spec: a declarative list of what goes into a bundle (TOML or JSON).

Paths in a spec are relative to the spec file's directory (or absolute).
Example (``bundle/examples/minimal.toml`` is a complete one)::

    format = "abhed-bundle-spec/1"
    name = "abhed"
    version = 1

    [platform]
    os = "linux"
    arch = "x86_64"
    glibc = "2.36"
    python = "3.11"
    accelerator = "cpu"

    [agent]
    project = "../.."            # built with `pip wheel`; or: wheel = "dist/x.whl"

    [wheelhouse]
    dir = "wheelhouse"           # every wheel must match a hash in the lock
    lock = "requirements.lock"   # pip's hash-locked format (--require-hashes)

    [[model]]
    name = "tiny"
    dir = "models/tiny"
    licence = "Apache-2.0"
    source = "built locally"

    [image]
    kernel = "image/vmlinuz"
    initrd = "image/initrd.img"
    rootfs = "image/rootfs.img"
    packages = "image/packages.txt"  # "name version arch" per line (dpkg-query output)

    [installer]
    binary = "dist/abhed-installer"

    [docs]
    files = ["../../docs/bundle.md"]

    [site]                       # the site's agent settings (docs/bundle.md)
    name = "plant-7"
    prefix = "/opt/abhed"        # where the installer puts it; {release} expands under it
    files = ["site/redact.py"]   # files the settings name, carried as site/files/<name>
    [site.settings.policy]       # config.json's keys and nesting
    mode = "ask"

    [roles]                      # hosts by role (bundle._roles); default: all only
    hosts = ["agent", "model"]
    model_endpoints = ["http://10.0.0.5:8000/v1"]

    [router_wheelhouse]          # with [roles.router]: vllm-router's wheels, for model hosts
    dir = "router-wheels"        # installed into a venv of their own (their pins are not vLLM's)
    lock = "router.lock"

An upgrade whose weights did not change can reference them instead of carrying
them again: ``reuse_weights_from = ["abhed-3.abhed"]`` (top level) names
earlier bundles; every model file whose sha256 one of them carried (or itself
referenced) becomes a manifest ``references`` entry.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from foundation import load_document, reraised_as

from ._errors import SpecError
from ._manifest import NAME_PATTERN, Platform
from ._roles import RolesSpec
from ._settings import DEFAULT_PREFIX, PREFIX_PATTERN, check_prefix

__all__ = ["AgentSpec", "BuildSpec", "DocsSpec", "ImageSpec", "InstallerSpec", "ModelSpec",
           "ReleaseSpec", "SiteSettingsSpec", "WheelhouseSpec", "load_spec"]

MAX_SPEC_BYTES = 1024 * 1024


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class AgentSpec(_Spec):
    """The project's own wheel: given, or built from ``project`` with ``pip wheel``."""

    wheel: str | None = None
    project: str | None = None

    @model_validator(mode="after")
    def _one(self) -> AgentSpec:
        if (self.wheel is None) == (self.project is None):
            raise ValueError("[agent] needs exactly one of wheel or project")
        return self


class WheelhouseSpec(_Spec):
    dir: str
    lock: str


class ModelSpec(_Spec):
    name: str = Field(pattern=NAME_PATTERN)
    dir: str
    licence: str
    source: str
    version: str | None = None


class ImageSpec(_Spec):
    kernel: str
    initrd: str | None = None
    rootfs: str
    packages: str | None = None
    manifest: str | None = Field(
        default=None, description="the image's own manifest.json (bundle.image writes it): "
        "with it, the installer lays the image out at {release}/image for the agent")
    version: str | None = None


class InstallerSpec(_Spec):
    binary: str
    version: str | None = None


class DocsSpec(_Spec):
    files: tuple[str, ...] = Field(min_length=1)


class SiteSettingsSpec(_Spec):
    """The site's agent settings, carried signed as ``site/settings.json`` (``_settings``)."""

    name: str = Field(pattern=NAME_PATTERN,
                      description="the site's name, recorded beside the installed settings")
    prefix: str = Field(default=DEFAULT_PREFIX, pattern=PREFIX_PATTERN)
    settings: dict[str, Any] = Field(description="config.json's keys and nesting")
    files: tuple[str, ...] = Field(default=(), max_length=256)

    @model_validator(mode="after")
    def _prefix(self) -> SiteSettingsSpec:
        check_prefix(self.prefix)
        return self


class ReleaseSpec(_Spec):
    """What names the bundle a spec makes, the same in a site spec and in the build spec
    gathered from it (``bundle gather`` copies them across): its name, its version (a host
    refuses anything older) and the time its files are stamped with."""

    name: str = Field(pattern=NAME_PATTERN)
    version: int = Field(ge=1)
    source_date_epoch: int | None = Field(default=None, ge=0)


class BuildSpec(ReleaseSpec):
    format: Literal["abhed-bundle-spec/1"]
    compression: Literal["auto", "zstd", "none"] = "auto"
    zstd_level: int = Field(default=3, ge=1, le=19)
    platform: Platform
    agent: AgentSpec | None = None
    wheelhouse: WheelhouseSpec | None = None
    router_wheelhouse: WheelhouseSpec | None = Field(
        default=None, description="vllm-router's wheels and their hash lock, carried as "
        "router/<wheel> for the model role when [roles.router] is declared (required then)")
    model: tuple[ModelSpec, ...] = ()
    image: ImageSpec | None = None
    installer: InstallerSpec | None = None
    docs: DocsSpec | None = None
    reuse_weights_from: tuple[str, ...] = Field(
        default=(), max_length=64,
        description="earlier bundles whose model files this one references by hash instead "
                    "of carrying them (an upgrade whose weights did not change)")
    site: SiteSettingsSpec | None = None
    roles: RolesSpec | None = Field(
        default=None, description="the roles the site's hosts take and the model endpoints "
        "agent hosts use (bundle._roles); without it the bundle is for role all only")

    @model_validator(mode="after")
    def _unique_models(self) -> BuildSpec:
        names = [m.name for m in self.model]
        if len(set(names)) != len(names):
            raise ValueError("two [[model]] entries share a name")
        router = self.roles is not None and self.roles.router is not None
        if router and self.router_wheelhouse is None:
            raise ValueError("[roles.router] needs [router_wheelhouse]: vllm-router's wheels "
                             "for the model host that runs it (abhed bundle gather writes it "
                             "from scripts/router-requirements.txt)")
        if not router and self.router_wheelhouse is not None:
            raise ValueError("[router_wheelhouse] without [roles.router]: no model host would "
                             "run the router; declare it, or leave the wheels out")
        return self


def load_spec(path: Path) -> BuildSpec:
    """Read a TOML (``.toml``) or JSON spec strictly; SpecError lists every problem, located."""
    with reraised_as(SpecError):
        return load_document(path, BuildSpec, what="spec", cap=MAX_SPEC_BYTES,
                             hint="Fix the spec (docs/bundle.md lists its keys) and build again.")


_LOCK_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)(.*)$")
_HASH = re.compile(r"--hash[= ]sha256:([0-9a-f]{64})")


def parse_lock(path: Path) -> dict[str, tuple[str, frozenset[str]]]:
    """pip's hash-locked requirements: normalized name -> (version, allowed sha256s)."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read lock file {path}: {exc}") from None
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for n, line in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LOCK_LINE.match(line)
        hashes = frozenset(_HASH.findall(line))
        if not m or not hashes:
            raise SpecError(f"{path}: entry {n} is not `name==version --hash=sha256:...`; "
                            "lock every requirement with its hash (pip-compile "
                            "--generate-hashes)")
        out[normalize(m.group(1))] = (m.group(2), hashes)
    return out


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()
