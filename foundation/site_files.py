"""The site layer's two files, as the installer writes them and everything else reads them.

A release's ``site/`` directory holds:

- ``settings.json``: the site's agent settings (``config.json``'s schema), the
  bundle's signed member byte for byte;
- ``origin.json`` (:data:`ORIGIN_FORMAT`): which site, release, bundle and
  signing keys the settings came from, and their sha256.

The installer writes them (``installer._site_install``), the agent trusts
them (``appliance.assembly._site_layer``) and ``abhed-installer status``
reports them: all three read through this module, strictly (a duplicate key,
a ``NaN`` or an unknown field is refused the same way for each), so no reader
can see a different record from another.

A public module rather than a name in :mod:`foundation` so that importing
:mod:`foundation` stays free of pydantic (the TUI names the modes before its
first frame); it stands on nothing of ours but :mod:`foundation`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from foundation._documents import parse_document, validate_document

__all__ = ["MAX_SITE_BYTES", "ORIGIN_FILE", "ORIGIN_FORMAT", "SETTINGS_FILE", "SiteOrigin",
           "read_origin", "read_settings"]

ORIGIN_FORMAT = "abhed-site-origin/1"
SETTINGS_FILE = "settings.json"
ORIGIN_FILE = "origin.json"
MAX_SITE_BYTES = 1 << 20  # each of the two files: settings are a few kilobytes


class SiteOrigin(BaseModel):
    """``origin.json``: where the settings came from, written by the installer."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    format: str = Field(default=ORIGIN_FORMAT, pattern=r"^abhed-site-origin/1$")
    site: str = Field(min_length=1, max_length=200)
    release: str | int = Field(description="The release's version, as the installer names it.")
    bundle_manifest_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    signing_key_ids: list[str] = Field(max_length=16)
    settings_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    def to_bytes(self) -> bytes:
        """The file as the installer writes it: sorted keys, two-space indent, a final newline."""
        body = self.model_dump(mode="json")
        body["format"] = ORIGIN_FORMAT
        return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()


def read_origin(data: bytes, source: str | Path) -> SiteOrigin:
    """``origin.json``'s bytes as a :class:`SiteOrigin`.

    Raises:
        DocumentError: not strict JSON (a duplicate key included), or not a valid record.
    """
    raw = parse_document(data, what="site origin", source=source, syntax="json")
    return validate_document(raw, SiteOrigin, what="site origin", source=source)


def read_settings(data: bytes, source: str | Path) -> dict[str, Any]:
    """``settings.json``'s bytes as written (a JSON object); validation is the agent's.

    Raises:
        DocumentError: not UTF-8, not JSON, a duplicate key, ``NaN``, or not an object.
    """
    return parse_document(data, what="site settings", source=source, syntax="json")
