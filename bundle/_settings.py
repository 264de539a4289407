"""The site's agent settings as a bundle carries them: ``site/settings.json``.

The operator writes the agent's settings as the ``[agent]`` table of the site
spec (or ``[site.settings]`` of a build spec), with exactly the keys and nesting
of the agent's ``config.json``.  The bundle package does not know that schema
(``bundle`` never imports ``appliance``): the builder is handed a check, the
agent's own ``Config`` model, which ``abhed bundle gather`` / ``build`` pass
(``cli/bundle.py``); without one, a spec that carries settings is
refused rather than signed unchecked.

**Where the settings point.**  Settings name files on the host: the catalog,
the microVM image, extension scripts, MCP servers' programs.  They are written
with two placeholders that the *builder* expands, so the signed member holds
literal absolute paths (what an auditor reads is what the agent reads, and the
installed file is byte-identical to the member):

* ``{release}``: ``PREFIX/releases/<version>``, the directory the installer
  makes for this very bundle; e.g. ``{release}/bundle/models/qwen/abhed-catalog.json``,
  ``{release}/image`` (the microVM image), ``{release}/venv/bin/python``,
  ``{release}/bundle/site/files/redact.py`` (a file the site ships, below);
* ``{prefix}``: the install prefix itself (``/opt/abhed`` unless the spec says).

Paths name this release's own directory, never ``PREFIX/current``: a release's
settings and the files they name switch together, in the one rename of
``current`` that upgrades and rolls back.  The price is that a bundle with
settings is built for one prefix (the spec's ``prefix``); the installer refuses
to put it anywhere else, naming the key.  The model service is the installer's:
``http://127.0.0.1:8000/v1`` (docs/installer.md).

Files the settings name that the site ships (extension scripts, a policy
helper) are carried as ``site/files/<name>``; every literal path under
``{release}/bundle/`` must name a file the bundle carries (checked here, at
build time), and every other path under ``{release}`` must exist once the
release is staged (checked by the installer, before anything is switched).

The member is canonical JSON: sorted keys, two-space indentation, UTF-8, a
final newline; at most :data:`MAX_SETTINGS_BYTES`.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from foundation import is_within

from ._errors import SpecError

__all__ = ["DEFAULT_PREFIX", "MAX_SETTINGS_BYTES", "PREFIX_PATTERN", "SETTINGS_MEMBER",
           "SITE_FILES", "SettingsCheck", "check_carried", "check_prefix", "expand_settings",
           "prepare_settings", "release_dir", "release_paths", "settings_bytes",
           "unexpand"]

SETTINGS_MEMBER: Final = "site/settings.json"
SITE_FILES = "site/files/"
DEFAULT_PREFIX = "/opt/abhed"
MAX_SETTINGS_BYTES = 256 * 1024

PREFIX_PATTERN = r"^/[A-Za-z0-9_.+@/-]{1,200}$"
"""An install prefix's characters (no white space: the installer refuses it)."""


def check_prefix(prefix: str) -> None:
    """ValueError unless ``prefix`` is a normalised absolute directory other than ``/``."""
    if posixpath.normpath(prefix) != prefix or prefix.startswith("//") or prefix == "/":
        raise ValueError(f"prefix {prefix!r} must be a normalised absolute directory other "
                         f"than / (e.g. {posixpath.normpath(prefix)!r})")


SettingsCheck = Callable[[Mapping[str, Any]], None]
"""Checks settings against the agent's schema; raises ``ValueError`` naming the key."""


def release_dir(prefix: str, version: int) -> str:
    """``{release}``: where the installer puts this version under ``prefix``."""
    return f"{prefix.rstrip('/')}/releases/{version}"


def _expand(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for key, text in values.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, list):
        return [_expand(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, values) for k, v in value.items()}
    return value


def expand_settings(raw: Mapping[str, Any], *, prefix: str, version: int,
                    where: str = "[agent]") -> dict[str, Any]:
    """The settings with ``{release}`` and ``{prefix}`` filled in (string values only, never
    keys; any other ``{...}``, a regex quantifier say, is left alone).  ``raw`` is plain JSON:
    it came through the strict loader (``foundation``), which refuses what JSON cannot hold."""
    expanded: dict[str, Any] = _expand(dict(raw), {"release": release_dir(prefix, version),
                                                   "prefix": prefix.rstrip("/")})
    return expanded


def unexpand(value: Any, release: str) -> Any:
    """``release`` written back as ``{release}`` in every string (for comparing releases)."""
    if isinstance(value, str):
        return value.replace(release + "/", "{release}/") if value != release else "{release}"
    if isinstance(value, list):
        return [unexpand(v, release) for v in value]
    if isinstance(value, dict):
        return {k: unexpand(v, release) for k, v in value.items()}
    return value


def settings_bytes(settings: Mapping[str, Any]) -> bytes:
    """The member's one byte form (sorted keys, indent 2, UTF-8, final newline); capped."""
    data = (json.dumps(settings, sort_keys=True, indent=2, ensure_ascii=False,
                       allow_nan=False) + "\n").encode("utf-8")
    if len(data) > MAX_SETTINGS_BYTES:
        raise SpecError(f"the agent's settings are {len(data):,} bytes as JSON, over the "
                        f"{MAX_SETTINGS_BYTES:,}-byte cap: a site policy that large is a "
                        "mistake (a pasted file?); trim it")
    return data


def release_paths(settings: Any, release: str) -> list[str]:
    """Every string value that is a path under ``release`` (the installer checks them)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if is_within(value, release):
                found.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(settings)
    return sorted(set(found))


def check_carried(settings: Mapping[str, Any], release: str, staged: Iterable[str]) -> None:
    """Every path under ``{release}/bundle/`` must be a file the bundle carries, or a
    directory holding one; SpecError names the first that is not."""
    files = set(staged)
    dirs = {name.rsplit("/", i)[0] for name in files for i in range(1, name.count("/") + 1)}
    root = release + "/bundle/"
    for path in release_paths(settings, release):
        if not is_within(path, root):
            continue
        rel = path[len(root):].rstrip("/")
        if rel not in files and rel not in dirs:
            raise SpecError(f"the agent's settings name {path}, but the bundle carries no "
                            f"bundle/{rel}: name a file it carries (docs/bundle.md, "
                            "'Where the settings point'), or ship it with the site's files")


def prepare_settings(raw: Mapping[str, Any], *, prefix: str, version: int,
                     check: SettingsCheck | None, where: str) -> bytes:
    """The settings member's bytes: placeholders filled, the agent's schema checked.

    Without ``check`` the settings are refused: signing settings the agent would refuse
    to load (or, worse, read differently) helps nobody.
    """
    if check is None:
        raise SpecError(f"{where} holds the site's agent settings, which must be checked "
                        "against the agent's schema before they are signed: use `abhed bundle "
                        "gather` or `abhed bundle build`, or pass check_settings")
    settings = expand_settings(raw, prefix=prefix, version=version, where=where)
    try:
        check(settings)
    except ValueError as exc:
        raise SpecError(f"{where} is not valid agent settings: {exc}") from None
    return settings_bytes(settings)
