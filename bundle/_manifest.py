"""The signed manifest: what a bundle holds, for which platform, made from what.

The manifest is the only thing the signature covers; every payload byte is
bound to it by a length and a sha256.  It is parsed only after its signature
has been checked, and then strictly: unknown fields, duplicate JSON keys,
non-finite numbers and wrong types are refused, so that two verifiers can
never read the same signed bytes two ways.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from foundation import DocumentError, parse_document, validate_document

from ._errors import FormatError
from ._roles import MAX_ENDPOINTS, ROLE_NAMES, SiteRouter, check_roles
from ._settings import PREFIX_PATTERN
from ._tar import check_member_name

__all__ = ["FORMAT", "MANIFEST_NAME", "MAX_MANIFEST_BYTES", "SIGNATURE_NAME", "Component",
           "Input", "Manifest", "Member", "Platform", "Provenance", "Reference", "Roles", "SiteInfo",
           "canonical_json", "manifest_json", "parse_manifest", "staged_name", "strict_json"]

FORMAT: Final = "abhed-bundle/1"
MANIFEST_NAME = "manifest.json"
SIGNATURE_NAME = "manifest.json.minisig"
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MAX_MEMBERS = 100_000
_SHA256 = r"^[0-9a-f]{64}$"
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
"""What a bundle, its site and a model in it may be named (a spec's ``name``, the manifest's):
one lower-case word that is safe in a file name."""
_NAME = re.compile(NAME_PATTERN)

ComponentKind = Literal["agent", "wheel", "vllm", "model", "image", "installer", "docs",
                        "site", "router"]
"""``router``: a wheel of vllm-router (``router/<wheel>``), for the model host that runs it,
installed into a venv of its own."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Platform(_Model):
    """Where the bundle can run.  ``accelerator`` "cpu" needs no GPU fields."""

    os: Literal["linux"]
    arch: Literal["x86_64", "aarch64"]
    glibc: str = Field(pattern=r"^\d+\.\d+$", description="minimum glibc, e.g. 2.36")
    python: str = Field(pattern=r"^3\.\d+$", description="CPython of the wheels, e.g. 3.11")
    accelerator: Literal["cpu", "nvidia"]
    nvidia_driver_min: str | None = Field(default=None, pattern=r"^\d+(\.\d+)*$")
    cuda: str | None = Field(default=None, pattern=r"^\d+\.\d+$")

    @model_validator(mode="after")
    def _gpu_fields(self) -> Platform:
        gpu = (self.nvidia_driver_min, self.cuda)
        if self.accelerator == "nvidia" and None in gpu:
            raise ValueError("accelerator 'nvidia' needs nvidia_driver_min and cuda")
        if self.accelerator == "cpu" and gpu != (None, None):
            raise ValueError("accelerator 'cpu' takes no nvidia_driver_min or cuda")
        return self


class Member(_Model):
    """One payload file of the outer tar, as stored and as unpacked."""

    name: str
    size: int = Field(ge=0, description="bytes stored in the tar")
    sha256: str = Field(pattern=_SHA256)
    compression: Literal["none", "zstd"]
    content_size: int = Field(ge=0, description="bytes after decompression")
    content_sha256: str = Field(pattern=_SHA256)

    @model_validator(mode="after")
    def _consistent(self) -> Member:
        check_member_name(self.name)
        if self.name in (MANIFEST_NAME, SIGNATURE_NAME):
            raise ValueError(f"{self.name!r} is reserved for the manifest and its signature")
        if self.compression == "none" and (self.content_size, self.content_sha256) != (
                self.size, self.sha256):
            raise ValueError(f"member {self.name!r} is uncompressed but its content size/hash "
                             "differ from its stored size/hash")
        if self.compression == "zstd" and not self.name.endswith(".zst"):
            raise ValueError(f"zstd member {self.name!r} must be named *.zst")
        return self


def staged_name(member: Member) -> str:
    """Where a member lands once unpacked: its name without the ``.zst`` suffix."""
    return member.name[:-4] if member.compression == "zstd" else member.name


class Reference(_Model):
    """A model file the bundle does not carry: an earlier bundle did, and the host keeps it.

    An upgrade that changes the agent but not the weights need not carry them
    again (``reuse_weights_from`` in the build spec).  The installer links the
    file from its content-addressed store, re-hashing it first, and refuses
    the bundle before unpacking anything when the store lacks it.  Only model
    components may name references: the store keeps model files alone.
    """

    name: str = Field(description="where the file lands once staged, e.g. models/x/a.bin")
    content_size: int = Field(ge=0)
    content_sha256: str = Field(pattern=_SHA256)
    carried_by: str = Field(min_length=1, max_length=200,
                            description="the bundle that carried it, e.g. 'abhed version 3'")

    @model_validator(mode="after")
    def _safe(self) -> Reference:
        check_member_name(self.name)
        if not self.name.startswith("models/") or self.name.endswith(".zst"):
            raise ValueError(f"reference {self.name!r} must be a model file (models/...) "
                             "and not *.zst")
        return self


class SiteInfo(_Model):
    """The site's agent settings this bundle carries (docs/bundle.md, ``[agent]``).

    ``settings`` is the member (as unpacked) holding them; ``prefix`` is where they
    were built to be installed, since their paths name ``PREFIX/releases/<version>``:
    the installer refuses another prefix.
    """

    name: str = Field(pattern=NAME_PATTERN)
    prefix: str = Field(pattern=PREFIX_PATTERN)
    settings: Literal["site/settings.json"]


class Roles(_Model):
    """Which roles the site's hosts take, and what each installs (``bundle._roles``).

    ``agent`` and ``model`` list member names (as stored) and, for ``model``, the
    references; ``all`` installs every member.  ``model_endpoints`` are the model
    service's URLs an agent host's provider points at: its health gate may reach those
    and nothing else.  ``router``: several model hosts behind the vLLM router, on the model
    host it names (absent when none: older verifiers still read such a bundle).  Checked by
    ``bundle._roles.check_roles``, the spec's own check.
    """

    hosts: tuple[str, ...] = Field(min_length=1, max_length=len(ROLE_NAMES))
    agent: tuple[str, ...] = Field(default=(), max_length=MAX_MEMBERS)
    model: tuple[str, ...] = Field(default=(), max_length=MAX_MEMBERS)
    model_endpoints: tuple[str, ...] = Field(default=(), max_length=MAX_ENDPOINTS)
    settings_template_sha256: str | None = Field(
        default=None, pattern=_SHA256,
        description="sha256 of the site settings with this release's directory written back "
        "as {release}: the same in two bundles whose settings differ only by their version, "
        "so an upgrade that changes only the model leaves agent hosts as they are")
    router: SiteRouter | None = None

    @model_validator(mode="after")
    def _known(self) -> Roles:
        check_roles(self.hosts, self.model_endpoints, self.router)
        return self


class Component(_Model):
    kind: ComponentKind
    name: str
    version: str | None = None
    members: tuple[str, ...]
    licence: str | None = None
    source: str | None = None


class Input(_Model):
    """A build input, as named in the spec, with its digest."""

    path: str
    sha256: str = Field(pattern=_SHA256)
    size: int = Field(ge=0)


class Provenance(_Model):
    builder: str
    source_date_epoch: int | None = Field(default=None, ge=0)
    spec_sha256: str = Field(pattern=_SHA256)
    inputs: tuple[Input, ...]


class Manifest(_Model):
    """The signed description of a bundle (format ``abhed-bundle/1``)."""

    format: Literal["abhed-bundle/1"]
    name: str
    version: int = Field(ge=1, description="monotonic; a host refuses anything older")
    platform: Platform
    members: tuple[Member, ...] = Field(max_length=MAX_MEMBERS)
    references: tuple[Reference, ...] = Field(default=(), max_length=MAX_MEMBERS)
    components: tuple[Component, ...]
    sbom: str
    provenance: Provenance
    site: SiteInfo | None = None
    roles: Roles | None = None

    @model_validator(mode="after")
    def _coherent(self) -> Manifest:
        if not _NAME.match(self.name):
            raise ValueError(f"bundle name {self.name!r} must match {_NAME.pattern}")
        seen: set[str] = set()
        landing = [(m.name, {m.name.casefold(), staged_name(m).casefold()}) for m in self.members]
        landing += [(r.name, {r.name.casefold()}) for r in self.references]
        for name, keys in landing:
            # Case-folded, and by unpacked name too: two members (or a member and a
            # reference) must never land on the same file, not even on a case-insensitive
            # file system.
            for key in keys:
                if key in seen:
                    raise ValueError(f"member {name!r} collides with another member")
                seen.add(key)
        names = {m.name for m in self.members}
        referenced = {r.name for r in self.references}
        owned: dict[str, str] = {}
        for c in self.components:
            for name in c.members:
                if name in referenced and c.kind != "model":
                    raise ValueError(f"component {c.name!r} ({c.kind}) lists reference "
                                     f"{name!r}; only model components may")
                if name not in names and name not in referenced:
                    raise ValueError(f"component {c.name!r} lists unknown member {name!r}")
                if name in owned:
                    raise ValueError(f"member {name!r} belongs to both {owned[name]!r} and "
                                     f"{c.name!r}")
                owned[name] = c.name
        if self.sbom not in names:
            raise ValueError(f"sbom {self.sbom!r} is not a member")
        site_members = {n for c in self.components if c.kind == "site" for n in c.members}
        if self.site is None and site_members:
            raise ValueError("a site component without the manifest's 'site' entry")
        if self.site is not None:
            settings = [m.name for m in self.members if staged_name(m) == self.site.settings]
            if not settings or settings[0] not in site_members:
                raise ValueError(f"site settings {self.site.settings!r} is not a member of a "
                                 "site component")
        for name in site_members:
            if not name.startswith("site/"):
                raise ValueError(f"site component member {name!r} is not under site/")
        orphans = (names | referenced) - set(owned) - {self.sbom}
        if orphans:
            raise ValueError(f"members belong to no component: {sorted(orphans)[:5]}")
        if self.roles is not None:
            self._check_roles(self.roles, names, referenced)
        return self

    def _check_roles(self, roles: Roles, names: set[str], referenced: set[str]) -> None:
        """Each role names real members; what one role must never get, it does not list."""
        kinds = {n: c.kind for c in self.components for n in c.members}
        for role, listed in (("agent", roles.agent), ("model", roles.model)):
            for name in listed:
                if name not in names and name not in referenced:
                    raise ValueError(f"role {role!r} lists unknown member {name!r}")
                if role == "agent" and (name in referenced
                                        or kinds.get(name) in ("vllm", "router")):
                    raise ValueError(f"role 'agent' lists {name!r}: an agent host gets no "
                                     "weights, no vLLM and no vLLM router")
                if role == "model" and kinds.get(name) in ("image", "site"):
                    raise ValueError(f"role 'model' lists {name!r}: a model host gets no "
                                     "microVM image and no site settings")
        left = (names | referenced) - set(roles.agent) - set(roles.model) - {self.sbom}
        if left:
            raise ValueError(f"members no role installs: {sorted(left)[:5]}")

    @property
    def host_roles(self) -> tuple[str, ...]:
        """The roles this bundle serves (``all`` only for a bundle without roles)."""
        return ("all",) if self.roles is None else self.roles.hosts

    def role_files(self, role: str) -> frozenset[str] | None:
        """The members (stored names) and references ``role`` installs; None: every one."""
        if self.roles is None or role == "all":
            return None
        listed = self.roles.agent if role == "agent" else self.roles.model
        return frozenset((*listed, self.sbom))

    def for_role(self, role: str) -> Manifest:
        """This manifest as one role sees it: only the members and references it installs
        (what staging unpacks, the record holds and the disk check counts)."""
        keep = self.role_files(role)
        if keep is None:
            return self
        settings = self.settings_member()
        assert self.roles is not None
        roles = self.roles.model_copy(update={
            "agent": tuple(n for n in self.roles.agent if n in keep),
            "model": tuple(n for n in self.roles.model if n in keep)})
        return self.model_copy(update={
            "roles": roles,
            "site": self.site if settings is not None and settings.name in keep else None,
            "members": tuple(m for m in self.members if m.name in keep),
            "references": tuple(r for r in self.references if r.name in keep),
            "components": tuple(c.model_copy(update={"members": tuple(
                n for n in c.members if n in keep)}) for c in self.components
                if any(n in keep for n in c.members))})

    def settings_member(self) -> Member | None:
        """The member carrying the site's agent settings, if the bundle has any."""
        if self.site is None:
            return None
        return next(m for m in self.members if staged_name(m) == self.site.settings)

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)

    @property
    def payload_size(self) -> int:
        return sum(m.size for m in self.members)

    @property
    def referenced_size(self) -> int:
        """Bytes of model files the host must already hold (see :class:`Reference`)."""
        return sum(r.content_size for r in self.references)

    def staged_files(self) -> dict[str, tuple[str, int]]:
        """Staged name -> (sha256, size) of every file of the release, carried or referenced."""
        files = {staged_name(m): (m.content_sha256, m.content_size) for m in self.members}
        files.update((r.name, (r.content_sha256, r.content_size)) for r in self.references)
        return files


def strict_json(data: bytes, what: str, cap: int) -> dict[str, Any]:
    """A JSON object from bytes that are no file (a member), strictly (see
    ``foundation.parse_document``): oversize input, duplicate keys, NaN/Infinity, deep
    nesting and anything but an object are refused."""
    if len(data) > cap:
        raise FormatError(f"{what} is {len(data)} bytes, over its {cap}-byte cap: refused")
    try:
        return parse_document(data, what=what, source="", syntax="json")
    except DocumentError as exc:
        raise FormatError(str(exc)) from None


def parse_manifest(data: bytes) -> Manifest:
    """Parse and check a manifest; call only after its signature was verified."""
    raw = strict_json(data, MANIFEST_NAME, MAX_MANIFEST_BYTES)
    if raw.get("format") != FORMAT:
        raise FormatError(f"manifest format {raw.get('format')!r} is not {FORMAT!r}: this "
                          "bundle needs a newer (or different) verifier")
    try:
        return validate_document(raw, Manifest, what=MANIFEST_NAME, source="")
    except DocumentError as exc:
        newer = any(p.message.startswith("unknown key") for p in exc.problems)
        raise FormatError(str(exc) + ("\nunknown fields mean a newer builder made this bundle: "
                                      "verify it with that version" if newer else "")) from None


def manifest_json(manifest: Manifest) -> bytes:
    """The manifest's signed byte form.  ``references``, ``site`` and ``roles`` are written only when
    there are some: a bundle that carries everything and no settings reads the same as
    before they existed, so older verifiers still take it (and refuse, by name, one that
    has them)."""
    data = manifest.model_dump(mode="json")
    for optional in ("references", "site", "roles"):  # absent when empty: older verifiers read it
        if not data[optional]:
            del data[optional]
    if "roles" in data and data["roles"]["router"] is None:
        del data["roles"]["router"]
    return canonical_json(data)


def canonical_json(value: Any) -> bytes:
    """The one byte form we write: sorted keys, two-space indent, ASCII, final newline."""
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=True,
                       allow_nan=False) + "\n").encode()
