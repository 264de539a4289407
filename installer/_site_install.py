"""The site layer on the host: the release's signed agent settings, and the links by which
every copy of ``abhed`` on the host finds them (docs/installer.md, *The site layer*).

    PREFIX/releases/<v>/site/             root-owned 0755
        settings.json                     byte-identical to the bundle member, 0644
        origin.json                       where they came from (abhed-site-origin/1), 0644
    PREFIX/releases/<v>/venv/abhed-site -> PREFIX/current/site
    PREFIX/releases/<v>/image/            the microVM image as ``sandbox.image_dir`` wants it
    /etc/abhed/site -> PREFIX/current/site          the host link
    /usr/local/bin/abhed -> PREFIX/bin/abhed        on engineers' PATH

The installed ``abhed`` looks for the site layer at ``/etc/abhed/site`` first, then at
``<sys.prefix>/abhed-site`` (its venv's link); both go through ``PREFIX/current``, so the
settings switch with the code in the one rename that upgrades and rolls back, and an
older release's binary run directly still gets the current settings.

The two host links are made only for the default prefix (``/opt/abhed``), or where
``--host-link`` / ``--bin-link`` name: a test's temporary prefix never touches the host's
``/etc`` or ``/usr/local/bin``.  Their paths are kept in the state file, so upgrade,
rollback, check, status, repair and uninstall find them.  The host link exists exactly
while the current release carries settings: it is made after the switch (never
dangling), and removed only when the operator switches to a release without settings
with ``--drop-site-layer`` (engineers then run with no site layer; recorded).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foundation import digest_file, is_within
from foundation.site_files import ORIGIN_FORMAT, SiteOrigin, read_settings

from ._audit import AuditLog
from ._errors import CheckFailed, StepFailed, UsageError
from ._layout import DEFAULT_PREFIX, Layout, State, atomic_write
from ._preflight import Check, sysroot
from ._txn import remove_tree

if TYPE_CHECKING:
    from bundle import Manifest

__all__ = ["ORIGIN_FORMAT", "SITE_DIR", "VENV_LINK", "HostLinks", "install_site",
           "link_problems", "make_links", "undo_links", "vouched", "Vouched", "write_site", "origin_body", "release_has_site", "remove_links",
           "settings_digest", "site_checks", "site_dir_problems"]

SITE_DIR = "site"
VENV_LINK = "venv/abhed-site"
_IMAGE_FILES = {"kernel": "vmlinuz", "initrd": "initrd.img", "rootfs": "rootfs.ext4",
                "manifest": "manifest.json"}


@dataclass(frozen=True)
class HostLinks:
    """Where the host link and the PATH link go (None: not made for this prefix)."""

    site: Path | None
    bin: Path | None

    @classmethod
    def of(cls, state: State) -> HostLinks:
        """The links this prefix has (from its state file)."""
        return cls(Path(state.host_link) if state.host_link else None,
                   Path(state.bin_link) if state.bin_link else None)

    @classmethod
    def choose(cls, layout: Layout, site: Path | None, bin_: Path | None,
               kept: HostLinks | None) -> HostLinks:
        """The operator's ``--host-link``/``--bin-link``, else those this prefix already
        has, else the defaults for ``/opt/abhed`` (under ``ABHED_INSTALLER_SYSROOT``)."""
        default = layout.prefix == DEFAULT_PREFIX
        root = sysroot()
        chosen = []
        for given, old, path in ((site, kept.site if kept else None, "etc/abhed/site"),
                                 (bin_, kept.bin if kept else None, "usr/local/bin/abhed")):
            if given is not None and old is not None and given.absolute() != old:
                raise UsageError(f"this prefix's link is {old}; it cannot move to {given} on "
                                 "an upgrade: uninstall first, or leave the option out")
            chosen.append(given.absolute() if given is not None else
                          old if old is not None else (root / path if default else None))
        return cls(chosen[0], chosen[1])


def release_has_site(release: Path) -> bool:
    return (release / SITE_DIR / "settings.json").is_file()


def settings_digest(release: Path) -> str | None:
    """sha256 of the release's installed settings (None: it carries none)."""
    try:
        return digest_file(release / SITE_DIR / "settings.json").sha256
    except FileNotFoundError:
        return None


def _link_target(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except FileNotFoundError:
        return None
    except OSError:
        return "(not a symbolic link)"


def site_checks(manifest: Manifest, layout: Layout, links: HostLinks) -> list[Check]:
    """Preflight for the site layer: the prefix the settings were built for, root, and
    link paths that hold something else."""
    checks: list[Check] = []
    site = manifest.site
    if site is not None:
        ok = site.prefix == str(layout.prefix)
        checks.append(Check(
            "site_prefix", "ok" if ok else "fail", f"settings built for {site.prefix}",
            f"the install prefix, {layout.prefix}",
            "" if ok else f"install with --prefix {site.prefix}, or gather the bundle again "
            f"with prefix = \"{layout.prefix}\" in the site spec (its settings name files "
            f"under {site.prefix}/releases/{manifest.version})"))
        root = os.geteuid() == 0
        checks.append(Check(
            "site_owner", "ok" if root else "fail", f"euid {os.geteuid()}", "root (euid 0)",
            "" if root else "run abhed-installer as root: the agent refuses site settings "
            "that are not root-owned, so engineers could not start it"))
    wants = [(links.site, layout.current / SITE_DIR, site is not None),
             (links.bin, layout.bin / "abhed", True)]
    for path, target, needed in wants:
        if path is None or not needed:
            continue
        found = _link_target(path)
        fine = found is None or found == str(target)
        checks.append(Check(
            "link", "ok" if fine else "fail",
            f"{path} {'free' if found is None else '-> ' + found}", f"{path} -> {target}",
            "" if fine else f"{path} holds something else: move it away, or name another "
            "place with --host-link/--bin-link"))
    return checks


def origin_body(manifest: Manifest, signers: tuple[str, ...], manifest_sha256: str,
                settings_sha256: str | None = None) -> bytes:
    """origin.json: which site, release, bundle and keys the settings came from, and their
    digest (the signed member's, or that of a local tightening: ``installer._local``)."""
    member = manifest.settings_member()
    assert manifest.site is not None and member is not None
    # "release" is text, as the agent's origin record (appliance.compose) reads it.
    return SiteOrigin(site=manifest.site.name, release=str(manifest.version),
                      bundle_manifest_sha256=manifest_sha256, signing_key_ids=sorted(signers),
                      settings_sha256=settings_sha256 or member.content_sha256).to_bytes()


def _image_dir(release: Path, manifest: Manifest) -> None:
    """``image/`` as the agent's sandbox reads it, by relative links into ``bundle/image``."""
    from bundle import staged_name

    image = [c for c in manifest.components if c.kind == "image"]
    if not image:
        return
    by_role = {}
    for name in image[0].members:
        member = staged_name(manifest.member(name))
        role = member.removeprefix("image/").split("-", 1)[0]
        if role in _IMAGE_FILES:
            by_role[role] = member
    if "manifest" not in by_role:
        return  # an image without its manifest cannot be used by the sandbox
    out = release / "image"
    out.mkdir(mode=0o755)
    for role, member in sorted(by_role.items()):
        os.symlink(f"../bundle/{member}", out / _IMAGE_FILES[role])


def install_site(release: Path, layout: Layout, manifest: Manifest, signers: tuple[str, ...],
                 manifest_sha256: str) -> str | None:
    """Lay out the release's site layer (and its image); the settings' sha256, or None when
    the bundle carries none.  Called after the venv is built and before the record."""
    from bundle import release_paths

    _image_dir(release, manifest)
    member = manifest.settings_member()
    if member is None:
        return None
    data = (release / "bundle" / "site" / "settings.json").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != member.content_sha256:  # it was verified as it streamed: a bug or a race
        raise StepFailed(f"the staged site settings' sha256 {digest} is not the signed "
                         f"{member.content_sha256}; nothing was switched: install again")
    # The agent trusts the settings only if no directory on the way is writable by group or
    # others (a umask of 002 would leave releases/ so): the installer's own are made 0755.
    for directory in (layout.prefix, layout.releases, release):
        os.chmod(directory, stat.S_IMODE(os.stat(directory).st_mode) & ~0o022)
    write_site(release, layout, data, origin_body(manifest, signers, manifest_sha256))
    missing = [p for p in release_paths(read_settings(data, release / SITE_DIR), str(release))
               if not os.path.exists(p)]
    if missing:
        raise StepFailed(f"the site settings name {len(missing)} path(s) this release does not "
                         f"have: {', '.join(missing[:5])}. Engineers' abhed would fail on them; "
                         "nothing was switched. Fix the [agent] table (docs/bundle.md, 'Where "
                         "the settings point') and gather the bundle again")
    return digest


def write_site(release: Path, layout: Layout, settings: bytes, origin: bytes) -> None:
    """``site/`` (root 0755) with settings.json and origin.json (root 0644), and the venv's
    link; whatever was there is replaced (``repair`` calls this too)."""
    site = release / SITE_DIR
    if os.path.lexists(site) and (site.is_symlink() or not site.is_dir()):
        site.unlink()
    site.mkdir(mode=0o755, exist_ok=True)
    for name, data in (("settings.json", settings), ("origin.json", origin)):
        atomic_write(site / name, data, 0o644)
    for path, mode in ((site, 0o755), (site / "settings.json", 0o644),
                       (site / "origin.json", 0o644)):
        os.chown(path, os.geteuid(), os.getegid())  # root's, as the installer runs
        os.chmod(path, mode)  # whatever the umask
    for extra in set(os.listdir(site)) - {"settings.json", "origin.json"}:
        remove_tree(site / extra)  # only a repair finds anything else
    link = release / VENV_LINK
    if os.path.lexists(link) and link.is_dir() and not link.is_symlink():
        raise StepFailed(f"{link} is a directory, not the installer's link: move it away")
    _set_link(link, str(layout.current / SITE_DIR))


@dataclass(frozen=True)
class Vouched:
    """A release's signed manifest and settings, as far as the audit log vouches for them."""

    manifest: Manifest
    signers: tuple[str, ...]
    manifest_sha256: str
    signed: bytes  # the signed member's bytes, as staged in bundle/site/settings.json

    def origin(self, settings_sha256: str | None = None) -> bytes:
        return origin_body(self.manifest, self.signers, self.manifest_sha256, settings_sha256)


def vouched(layout: Layout, audit: AuditLog, version: int) -> Vouched:
    """``release.json`` trusted because its sha256 is the one the audit log recorded at
    install (the chain is verified first), and the staged settings member still with the
    signed sha256; CheckFailed (reinstall) otherwise."""
    from bundle import Manifest
    from foundation import digest_file, parse_document, validate_document

    rel = layout.release(version)
    audit.verify()
    entry = audit.recorded(version)
    release_json = rel / "release.json"
    if entry is None or digest_file(release_json).sha256 != entry.get("release_sha256"):
        raise CheckFailed(f"{release_json} is not the one recorded in the audit log: the "
                          "release cannot vouch for its own files; reinstall it from its bundle "
                          "(uninstall --keep-data, install)")
    body = parse_document(release_json.read_bytes(), what="release record", source=release_json)
    manifest = validate_document(body.get("manifest") or {}, Manifest, what="release record",
                                 source=release_json, strict=False)
    member = manifest.settings_member()
    if member is None:
        raise UsageError(f"release {version} carries no site settings")
    staged = rel / "bundle" / "site" / "settings.json"
    data = staged.read_bytes() if staged.is_file() else b""
    if hashlib.sha256(data).hexdigest() != member.content_sha256:
        raise CheckFailed(f"{staged} no longer has the signed sha256: reinstall the release "
                          "from its bundle (uninstall --keep-data, install)")
    return Vouched(manifest, tuple(body["signers"]), str(body["manifest_sha256"]), data)


@dataclass
class LinkChange:
    """One link made or removed by :func:`make_links`, and what was there before (undo)."""

    path: Path
    before: str | None
    after: str | None

    def undo(self) -> None:
        _set_link(self.path, self.before)

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "before": self.before, "after": self.after}


def _set_link(path: Path, target: str | None) -> None:
    """Make ``path`` a link to ``target`` (None: remove it), by an atomic rename."""
    if target is None:
        if path.is_symlink():
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    tmp = path.with_name(f".{path.name}.abhed-installer.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, path)


def undo_links(changes: list[LinkChange]) -> None:
    for change in reversed(changes):
        change.undo()


def make_links(layout: Layout, links: HostLinks, has_site: bool) -> list[LinkChange]:
    """Point the host link and the PATH link where they belong after a switch to a release
    with (or without) site settings; the changes made, for the undo and the audit log."""
    want = [(links.site, str(layout.current / SITE_DIR) if has_site else None),
            (links.bin, str(layout.bin / "abhed"))]
    changes: list[LinkChange] = []
    try:
        for path, target in want:
            if path is None:
                continue
            before = _link_target(path)
            if before == target:
                continue
            if before == "(not a symbolic link)":
                raise StepFailed(f"{path} is not a symbolic link (something else was put "
                                 "there): move it away and run again")
            _set_link(path, target)
            changes.append(LinkChange(path, before, target))
    except BaseException:
        undo_links(changes)  # all or nothing: the caller registers its undo on success
        raise
    return changes


def remove_links(layout: Layout, links: HostLinks) -> list[str]:
    """Uninstall: remove the links that still point into this prefix."""
    removed = []
    for path in (links.site, links.bin):
        if path is None:
            continue
        target = _link_target(path)
        if target is not None and is_within(target, layout.prefix):
            path.unlink()
            removed.append(str(path))
    return removed


def _owner_mode(path: Path, mode: int) -> str | None:
    st = path.lstat()
    bad = []
    if st.st_uid != 0 or st.st_gid != 0:
        bad.append(f"owner {st.st_uid}:{st.st_gid}, expected 0:0")
    if stat.S_IMODE(st.st_mode) != mode and not stat.S_ISLNK(st.st_mode):
        bad.append(f"mode {oct(stat.S_IMODE(st.st_mode))}, expected {oct(mode)}")
    return "; ".join(bad) or None


def site_dir_problems(release: Path) -> list[str]:
    """The site directory itself (the record covers its files and links, not directories)."""
    site = release / SITE_DIR
    if not os.path.lexists(site):
        return [f"{SITE_DIR}/: missing"]
    if site.is_symlink() or not site.is_dir():
        return [f"{SITE_DIR}/: is not a directory (it was replaced)"]
    why = _owner_mode(site, 0o755)
    return [f"{SITE_DIR}/: {why}"] if why else []


def link_problems(layout: Layout, links: HostLinks, has_site: bool) -> list[str]:
    """The host link and the PATH link, against where they must point now."""
    problems = []
    for path, target, what in (
            (links.site, str(layout.current / SITE_DIR) if has_site else None, "host link"),
            (links.bin, str(layout.bin / "abhed"), "PATH link")):
        if path is None:
            continue
        found = _link_target(path)
        if found != target:
            state = "missing" if found is None else f"-> {found}"
            problems.append(f"{what} {path}: {state}, expected "
                            f"{'-> ' + target if target else 'none'}")
        elif found is not None:
            owner = path.lstat()
            if owner.st_uid != 0:
                problems.append(f"{what} {path}: owner {owner.st_uid}, expected 0 (root)")
    return problems
