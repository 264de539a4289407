"""A release's site/ as the installer lays it out, for the tests that find or refuse it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

SETTINGS: dict[str, Any] = {"policy": {"mode": "ask", "deny": [{"tool": "bash", "command": "curl *"}]},
                            "loop": {"max_turns": 30}}


def write_site(directory: Path, settings: dict[str, Any] | None = None, *,
               release: str = "1.0", digest: str | None = None) -> Path:
    """A release's site/ as the installer lays it out: settings.json and origin.json, 0644."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o755)
    body = (json.dumps(settings if settings is not None else SETTINGS, sort_keys=True,
                       ensure_ascii=False) + "\n").encode()
    (directory / "settings.json").write_bytes(body)
    origin = {"format": "abhed-site-origin/1", "site": "lab", "release": release,
              "bundle_manifest_sha256": "c" * 64, "signing_key_ids": ["RWQkey1"],
              "settings_sha256": digest or hashlib.sha256(body).hexdigest()}
    (directory / "origin.json").write_text(json.dumps(origin))
    for name in ("settings.json", "origin.json"):
        os.chmod(directory / name, 0o644)
    return directory
