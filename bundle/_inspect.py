"""Look inside a bundle without unpacking or trusting it, and compare two bundles.

``inspect_bundle`` reads the manifest, the signature blocks and the SBOM, and
walks the tar headers by seeking past member data (so a multi-GB bundle is
inspected in milliseconds).  Without a trust policy everything it shows is
*claimed*, not proven, and says so; with one, it checks the signatures over
the manifest (not the payload: that is ``verify``).
"""

from __future__ import annotations

import difflib
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ._errors import FormatError, SignatureError
from ._manifest import Manifest, Member, parse_manifest, strict_json
from ._minisign import Signature, verify
from ._sbom import summarize_sbom
from ._settings import MAX_SETTINGS_BYTES, release_dir, settings_bytes, unexpand
from ._tar import TarReader
from ._trust import TrustPolicy, check_threshold
from ._verify import open_bundle_file, read_head

__all__ = ["BundleDiff", "BundleInfo", "SignerInfo", "comparable_settings", "diff_bundles",
           "diff_settings", "inspect_bundle"]

MAX_SBOM_BYTES = 64 * 1024 * 1024

SignerStatus = Literal["not checked", "trusted", "untrusted key", "invalid"]


@dataclass(frozen=True)
class SignerInfo:
    key_id: str
    algorithm: str
    trusted_comment: str
    status: SignerStatus


@dataclass(frozen=True)
class BundleInfo:
    """What ``inspect`` saw.

    Attributes:
        manifest: the manifest as claimed (proven only if ``trusted``).
        signers: each signature block and, with a trust policy, its status.
        trusted: True when the policy's threshold of signatures verified.
        tar_members: (name, size) of every payload member, in tar order.
        problems: differences between the tar and the manifest, found without hashing.
        sbom_summary: SBOM component counts by CycloneDX type.
        settings: the site's agent settings as carried (``site/settings.json``), checked
            against the manifest's digest; None when the bundle has none.
        manifest_sha256: sha256 of the manifest's signed bytes (the bundle's identity in
            the installer's records and every session's).
    """

    manifest: Manifest
    signers: tuple[SignerInfo, ...]
    trusted: bool
    tar_members: tuple[tuple[str, int], ...]
    problems: tuple[str, ...]
    sbom_summary: dict[str, int]
    settings: bytes | None = None
    manifest_sha256: str = ""


def _signer(sig: Signature, raw: bytes, trust: TrustPolicy | None) -> SignerInfo:
    status: SignerStatus = "not checked"
    if trust is not None:
        key = trust.key(sig.key_id)
        if key is None:
            status = "untrusted key"
        else:
            try:
                verify(sig, raw, key)
                status = "trusted"
            except SignatureError:
                status = "invalid"
    return SignerInfo(key_id=sig.key_id_hex, algorithm=sig.algorithm.decode(),
                      trusted_comment=sig.trusted_comment, status=status)


def _read_small(reader: TarReader, member: Member, cap: int, what: str) -> bytes:
    """A small member's content, unpacked, capped, and checked against the manifest."""
    data = reader.read_all(cap)
    if member.compression == "zstd":
        import zstandard

        dctx = zstandard.ZstdDecompressor(max_window_size=1 << 27)
        out = io.BytesIO()
        try:
            with dctx.stream_reader(io.BytesIO(data)) as r:
                while chunk := r.read(1 << 20):
                    out.write(chunk)
                    if out.tell() > cap:
                        raise FormatError(f"{what} unpacks past its {cap:,}-byte cap")
        except zstandard.ZstdError as exc:
            raise FormatError(f"{what} is not valid zstd data ({exc})") from None
        data = out.getvalue()
    if hashlib.sha256(data).hexdigest() != member.content_sha256:
        raise FormatError(f"{member.name}: its content's sha256 differs from the manifest: "
                          f"{what} was altered")
    return data


def inspect_bundle(path: Path, trust: TrustPolicy | None = None) -> BundleInfo:
    """Describe the bundle at ``path`` without unpacking it.

    Raises FormatError when the head (manifest, signatures) is unreadable;
    differences in the payload are reported in ``problems`` instead.
    """
    with open_bundle_file(path) as f:
        reader = TarReader(f, label=str(path))
        raw, sigs = read_head(reader)
        trusted = False
        if trust is not None:
            try:
                check_threshold(raw, sigs, trust, "the manifest")
                trusted = True
            except SignatureError:
                trusted = False
        manifest = parse_manifest(raw)
        declared = {m.name: m.size for m in manifest.members}
        seen: list[tuple[str, int]] = []
        problems: list[str] = []
        summary: dict[str, int] = {}
        settings_member = manifest.settings_member()
        settings: bytes | None = None
        try:
            while (header := reader.next_member()) is not None:
                seen.append((header.name, header.size))
                if header.name not in declared:
                    problems.append(f"{header.name}: in the tar but not in the manifest")
                elif declared[header.name] != header.size:
                    problems.append(f"{header.name}: {header.size} bytes in the tar, "
                                    f"{declared[header.name]} in the manifest")
                elif header.name == manifest.sbom and not summary:
                    sbom = _read_small(reader, manifest.member(manifest.sbom), MAX_SBOM_BYTES,
                                       "the SBOM")
                    summary = summarize_sbom(strict_json(sbom, "the SBOM", MAX_SBOM_BYTES))
                    continue
                elif settings_member is not None and header.name == settings_member.name \
                        and settings is None:
                    settings = _read_small(reader, settings_member, MAX_SETTINGS_BYTES,
                                           "the site's settings")
                    continue
                reader.skip()
        except FormatError as exc:
            problems.append(str(exc))
        names = [n for n, _ in seen]
        for m in manifest.members:
            if m.name not in names:
                problems.append(f"{m.name}: in the manifest but not in the tar")
        if len(set(names)) != len(names):
            problems.append("the tar holds duplicate member names")
        elif not problems and names != [m.name for m in manifest.members]:
            problems.append("members are not in manifest order")
    return BundleInfo(manifest=manifest, signers=tuple(_signer(s, raw, trust) for s in sigs),
                      trusted=trusted, tar_members=tuple(seen), problems=tuple(problems),
                      sbom_summary=summary, settings=settings,
                      manifest_sha256=hashlib.sha256(raw).hexdigest())


@dataclass(frozen=True)
class BundleDiff:
    """What installing ``new`` over ``old`` would change (from the manifests alone)."""

    old_version: int
    new_version: int
    platform_changes: tuple[str, ...]
    components_added: tuple[str, ...]
    components_removed: tuple[str, ...]
    components_changed: tuple[str, ...]
    files_added: tuple[str, ...]
    files_removed: tuple[str, ...]
    files_changed: tuple[str, ...]
    bytes_to_write: int


def _label(kind: str, name: str, ver: str | None) -> str:
    return f"{kind}:{name}" + (f" {ver}" if ver else "")


def diff_bundles(old: Manifest, new: Manifest) -> BundleDiff:
    """Compare two manifests by unpacked content (a member recompressed is not a change)."""
    from ._manifest import staged_name

    po, pn = old.platform.model_dump(), new.platform.model_dump()
    platform = tuple(f"{k}: {po[k]} -> {pn[k]}" for k in sorted(po) if po[k] != pn[k])
    co = {(c.kind, c.name): c.version for c in old.components}
    cn = {(c.kind, c.name): c.version for c in new.components}
    # References count as files (they are on the host once installed) but cost no bytes.
    fo, fn = old.staged_files(), new.staged_files()
    carried = {staged_name(m) for m in new.members}
    changed = sorted(n for n in set(fo) & set(fn) if fo[n][0] != fn[n][0])
    added = sorted(set(fn) - set(fo))
    return BundleDiff(
        old_version=old.version, new_version=new.version, platform_changes=platform,
        components_added=tuple(_label(*k, cn[k]) for k in sorted(set(cn) - set(co))),
        components_removed=tuple(_label(*k, co[k]) for k in sorted(set(co) - set(cn))),
        components_changed=tuple(f"{_label(*k, None)} {co[k]} -> {cn[k]}"
                                 for k in sorted(set(co) & set(cn)) if co[k] != cn[k]),
        files_added=tuple(added), files_removed=tuple(sorted(set(fo) - set(fn))),
        files_changed=tuple(changed),
        bytes_to_write=sum(fn[n][1] for n in added + changed if n in carried))


def comparable_settings(info: BundleInfo) -> dict[str, Any] | None:
    """The bundle's site settings with its own release directory written ``{release}`` again
    (each bundle's paths name its own: releases/3, releases/4), so that two bundles' settings
    differ only where their policy does; None without settings."""
    if info.settings is None or info.manifest.site is None:
        return None
    value = strict_json(info.settings, "the site's settings", MAX_SETTINGS_BYTES)
    release = release_dir(info.manifest.site.prefix, info.manifest.version)
    comparable: dict[str, Any] = unexpand(value, release)
    return comparable


def _settings_lines(info: BundleInfo) -> list[str]:
    # Re-rendered (sorted keys, indent 2), so the diff depends on the settings alone.
    value = comparable_settings(info)
    return [] if value is None else settings_bytes(value).decode("utf-8").splitlines()


def diff_settings(old: BundleInfo, new: BundleInfo, *, old_label: str = "old",
                  new_label: str = "new") -> list[str]:
    """The site's agent settings of two bundles as a unified diff, line by line, each
    release's own directory written ``{release}`` (empty when they are the same); a
    bundle without settings counts as having none."""
    return list(difflib.unified_diff(_settings_lines(old), _settings_lines(new),
                                     fromfile=old_label, tofile=new_label, lineterm="", n=3))
