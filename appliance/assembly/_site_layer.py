"""The site layer: the operator's signed agent settings, found where only root can put them.

Where (docs/configuration.md, "The site layer"), in this order:

1. :data:`HOST_SITE` (``/etc/abhed/site``), a link the installer makes to
   ``PREFIX/current/site``. Every copy of ``abhed`` on the host honours it,
   including one an engineer pip-installs from the same wheels. If it exists,
   it wins.
2. ``<sys.prefix>/abhed-site``, the link the installer puts in each release's
   venv, also to ``PREFIX/current/site`` (so an older release's binary run
   directly still gets the current settings).

Never from an environment variable, a flag or a file an engineer owns: every
path component from ``/`` to the two files (each link followed, each
directory passed) must be owned by root and not writable by group or others
(a root-owned directory with the sticky bit, like ``/tmp``, may be: nobody
but root can then replace root's entries in it), and the files must be
regular files. A site layer that is there but
broken (a dangling link, a file an engineer owns, settings that do not
validate or do not match the digest in ``origin.json``) refuses to start:
the operator's policy cannot be established, and running without it would
be the silent fallback users of other agents complain of (claude-code#43181).
Only a host with neither place is a development checkout.

The directory holds ``settings.json`` (``config.json``'s schema, canonical
JSON, byte-identical to the bundle's signed ``site/settings.json``) and
``origin.json`` (``abhed-site-origin/1``: site, release, bundle manifest
digest, signing key ids, settings digest); their formats are
:mod:`foundation.site_files`, which the installer writes them by.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance._errors import ConfigError
from appliance.assembly._config import Config
from foundation import FoundationError, read_regular, under, validate_document
from foundation.site_files import (
    MAX_SITE_BYTES,
    ORIGIN_FILE,
    SETTINGS_FILE,
    SiteOrigin,
    read_origin,
    read_settings,
)

__all__ = ["HOST_SITE", "MAX_SITE_BYTES", "SiteLayer", "SiteOrigin", "SiteRefused", "find_site",
           "load_site", "venv_site"]

#: The host link; a module constant so a test can point it elsewhere in-process.
HOST_SITE = Path("/etc/abhed/site")
_MAX_HOPS = 40  # symlinks followed on one path, as the kernel's own limit
_FIX = ("Ask the operator to repair the installation (`abhed-installer check`, then "
        "`abhed-installer repair` as root, or reinstall the release); Abhed will not start "
        "without the site's settings.")


class SiteRefused(ConfigError):
    """A site layer is present but cannot be trusted or read: nothing starts (fail closed)."""


def venv_site() -> Path:
    """The release venv's link to the current site settings."""
    return Path(sys.prefix) / "abhed-site"


@dataclass(frozen=True)
class SiteLayer:
    """The site's settings as found: where, what they say, and what vouches for them."""

    found_at: Path  # the place looked at (HOST_SITE or the venv link)
    directory: Path  # where it really is, every link followed
    settings: Config
    raw: dict[str, Any]  # settings.json as written: which keys the site set
    origin: SiteOrigin

    # the file a refusal names: as the engineer can find it (through the link)
    settings_file = under(SETTINGS_FILE, root="found_at")

    @property
    def settings_sha256(self) -> str:
        return self.origin.settings_sha256


def _refuse(where: Path, problem: str) -> SiteRefused:
    return SiteRefused(f"the site layer at {where} is present but {problem}. {_FIX}")


def _check_owner(path: str, st: os.stat_result, where: Path) -> None:
    if st.st_uid != 0:
        raise _refuse(where, f"{path} is owned by uid {st.st_uid}, not root: an engineer could "
                      "change what governs every session")
    if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:
        return  # like /tmp: others may add entries, but only root may replace root's own
    if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _refuse(where, f"{path} is writable by {'group' if st.st_mode & stat.S_IWGRP else 'others'} "
                      f"(mode {stat.S_IMODE(st.st_mode):o}): someone other than root could change it")


def _lstat(path: str, where: Path, missing: str) -> os.stat_result:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        raise _refuse(where, f"{path} {missing}") from None
    except OSError as exc:
        raise _refuse(where, f"{path} cannot be examined ({exc.strerror})") from None


def trusted_path(path: Path, where: Path) -> Path:
    """``path`` with every link followed, each component checked on the way (root, not g/o-writable).

    Walks the path as the kernel does, one component at a time from ``/``, so
    every directory passed and every link followed is checked, not only where
    it ends.

    Raises:
        SiteRefused: a component is missing, not root's, or writable by others.
    """
    pending = list(path.parts[1:]) if path.is_absolute() else []
    if not path.is_absolute():
        raise _refuse(where, f"{path} is not an absolute path")
    current = "/"
    _check_owner(current, os.lstat(current), where)
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current) or "/"
            continue
        nxt = os.path.join(current, part)
        st = _lstat(nxt, where, "does not exist (a link that points nowhere?)")
        _check_owner(nxt, st, where)
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > _MAX_HOPS:
                raise _refuse(where, f"{path} has more than {_MAX_HOPS} links in a row")
            target = os.readlink(nxt)
            pending = list(Path(target).parts[1:] if os.path.isabs(target) else Path(target).parts) \
                + pending
            if os.path.isabs(target):
                current = "/"
            continue
        if pending and not stat.S_ISDIR(st.st_mode):
            raise _refuse(where, f"{nxt} is not a directory")
        current = nxt
    return Path(current)


def _read(directory: Path, name: str, where: Path) -> bytes:
    path = directory / name
    st = _lstat(str(path), where, "is missing")
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(where, f"{path} is not a regular file")
    _check_owner(str(path), st, where)
    if not os.access(path, os.R_OK):
        raise _refuse(where, f"{path} cannot be read by this user (mode "
                      f"{stat.S_IMODE(st.st_mode):o}); the installer makes it readable by everyone "
                      "(0644)")
    try:
        return read_regular(path, MAX_SITE_BYTES, f"site {name}")
    except FoundationError as exc:
        raise _refuse(where, str(exc)) from None
    except OSError as exc:
        raise _refuse(where, f"{path} cannot be read ({exc.strerror})") from None


def _origin(directory: Path, data: bytes, where: Path) -> SiteOrigin:
    try:
        return read_origin(data, directory / ORIGIN_FILE)
    except FoundationError as exc:
        raise _refuse(where, f"{directory / ORIGIN_FILE} is not a valid origin record: {exc}") \
            from None


def load_site(where: Path) -> SiteLayer:
    """The site layer at ``where`` (a place that exists), checked whole, or :class:`SiteRefused`."""
    directory = trusted_path(where, where)
    if not directory.is_dir():
        raise _refuse(where, f"{directory} is not a directory")
    data = _read(directory, SETTINGS_FILE, where)
    origin_bytes = _read(directory, ORIGIN_FILE, where)
    origin = _origin(directory, origin_bytes, where)
    digest = hashlib.sha256(data).hexdigest()
    if digest != origin.settings_sha256:
        raise _refuse(where, f"{directory / 'settings.json'} has sha256 {digest}, not the "
                      f"{origin.settings_sha256} its origin.json records: the settings were changed "
                      "after the installer wrote them")
    try:
        raw = read_settings(data, directory / SETTINGS_FILE)
    except FoundationError as exc:
        raise _refuse(where, f"its settings are not strict JSON: {exc}") from None
    try:
        settings = validate_document(raw, Config, what="site settings",
                                     source=directory / "settings.json")
    except FoundationError as exc:
        raise _refuse(where, f"its settings are not a valid Abhed config for this release: {exc}") \
            from None
    settings._source = str(where / "settings.json")
    return SiteLayer(where, directory, settings, raw, origin)


def find_site() -> SiteLayer | None:
    """The site layer that governs this process, ``None`` on a development checkout.

    Raises:
        SiteRefused: a site layer is there but broken (fail closed).
    """
    for where in (HOST_SITE, venv_site()):
        try:
            os.lstat(where)
        except FileNotFoundError:
            continue
        except OSError as exc:
            # Not "absent": a place this user may not look into could hold the site's settings,
            # and answering "no site" would fail open (os.path.lexists says False here).
            raise _refuse(where, f"cannot be examined by this user ({exc.strerror})") from None
        return load_site(where)
    return None
