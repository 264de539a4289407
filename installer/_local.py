"""Local tightening: the operator narrows the site's signed settings on the host, without a
new bundle (docs/installer.md, *Tightening on the host*).

Why only a narrowing, and only this way: the signed settings are what the site's
publisher vouched for and an auditor can name by the bundle; a host that could
loosen them locally would make the signature mean nothing.  Narrowing is safe to
allow (it can only take away), and useful at once (a rule against a tool that
misbehaved today, a lower limit) where a new bundle takes a trip across the air
gap.  Widening always needs a new signed bundle, which is cheap: an upgrade that
changes only the settings references the weights by hash.

* ``abhed-installer site tighten FILE`` (root; FILE has config.json's keys and
  nesting, ``{release}`` and ``{prefix}`` as in the site spec) asks the release's
  own ``abhed config narrow`` whether FILE only narrows the signed settings, and
  for the effective settings if so: the one module that decides (``appliance.
  compose``), run from the release it governs.  The effective settings become
  ``site/settings.json`` (origin.json's digest with them), the signed member stays
  in ``bundle/site/``, and the overlay and the effective bytes are kept in
  ``state/site-local/<version>/`` (for ``repair`` and the next upgrade).  The audit
  log records both digests and the overlay's.
* ``abhed-installer site reset`` goes back to the signed settings (recorded).
* An upgrade carries the overlay to the new release only if it still narrows the new
  bundle's signed settings (asked of the new release's ``abhed``); otherwise it
  stops before anything is switched, naming what would loosen, and
  ``--drop-local-settings`` upgrades without it (recorded).

``check`` holds each release's ``site/settings.json`` to the digest the audit log
last recorded for it (installed, tightened or reset), so a tightening is not a
"change" and anything else still is.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from foundation import FileMissing, parse_document, read_regular, reraised_as

from ._audit import AuditLog
from ._errors import StepFailed, UsageError
from ._layout import Layout, atomic_write
from ._proc import child_env, run

__all__ = ["MAX_OVERLAY_BYTES", "expected_settings_sha256", "forget", "keep", "kept_settings",
           "local_dir", "local_overlay", "narrow", "read_overlay"]

MAX_OVERLAY_BYTES = 256 * 1024
_STEPS = ("site", "tighten", "reset")


def local_dir(layout: Layout, version: int) -> Path:
    return layout.state_dir / "site-local" / str(version)


def local_overlay(layout: Layout, version: int) -> dict[str, Any] | None:
    """The overlay a release was tightened with (placeholders kept), or None."""
    path = local_dir(layout, version) / "overlay.json"
    with reraised_as(StepFailed):
        try:
            data = read_regular(path, MAX_OVERLAY_BYTES, "local tightening record")
            return parse_document(data, what="local tightening record", source=path,
                                  hint="It was damaged: run `abhed-installer site reset` and "
                                  "tighten again.")
        except FileMissing:
            return None


def read_overlay(path: Path) -> dict[str, Any]:
    """The operator's FILE: a regular file, at most 256 KiB, strict JSON or TOML, an object."""
    with reraised_as(UsageError):
        data = read_regular(path, MAX_OVERLAY_BYTES, "tightening")
        return parse_document(data, what="tightening", source=path,
                              hint="Give config.json's keys and nesting (docs/configuration.md).")


def narrow(release: Path, layout: Layout, overlay: dict[str, Any],
           label: str) -> tuple[bytes, list[str]]:
    """The effective settings (their canonical bytes) if ``overlay`` only narrows the release's
    signed settings (``bundle/site/settings.json``, vouched for by the caller), and a line per
    narrower setting, asked of ``release``'s own ``abhed config narrow``; UsageError naming
    every loosening (``label``: how to name the overlay, the operator's file)."""
    from bundle import expand_settings, settings_bytes

    version = int(release.name)
    expanded = expand_settings(overlay, prefix=str(layout.prefix), version=version,
                               where="the tightening")
    base = release / "bundle" / "site" / "settings.json"
    with tempfile.TemporaryDirectory(prefix="abhed-narrow-") as tmp:
        over = Path(tmp) / "tightening.json"
        over.write_text(json.dumps(expanded))
        log = Path(tmp) / "narrow.log"
        out = Path(tmp) / "effective.json"
        done = run([str(release / "venv/bin/abhed"), "config", "narrow", str(base), str(over),
                    "--json", "--out", str(out)], log=log, env=child_env(), timeout_s=300)
        try:
            answer = json.loads(out.read_bytes())
        except (OSError, ValueError):
            raise StepFailed(f"release {version}'s abhed could not compare the settings (exit "
                             f"{done.returncode}): {done.output.strip()[-800:]}") from None
    refusals = [str(r).replace(str(over), label) for r in answer.get("refusals") or []]
    if refusals or done.returncode != 0 or not isinstance(answer.get("settings"), dict):
        shown = "\n  ".join(str(r) for r in refusals) or done.output.strip()[-800:]
        raise UsageError(f"the tightening would loosen release {version}'s signed settings, "
                         f"which only a new signed bundle may do:\n  {shown}")
    changes = [f"{c.get('setting')}: {json.dumps(c.get('signed'))} -> "
               f"{json.dumps(c.get('narrowed'))}" for c in answer.get("changes") or []
               if isinstance(c, dict)]
    return settings_bytes(answer["settings"]), changes


def keep(layout: Layout, version: int, overlay: dict[str, Any], effective: bytes) -> str:
    """Keep the overlay and the effective settings for ``version``; the overlay's sha256."""
    d = local_dir(layout, version)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    body = (json.dumps(overlay, indent=2, sort_keys=True) + "\n").encode()
    atomic_write(d / "overlay.json", body, 0o600)
    atomic_write(d / "settings.json", effective, 0o600)
    return hashlib.sha256(body).hexdigest()


def forget(layout: Layout, version: int) -> None:
    shutil.rmtree(local_dir(layout, version), ignore_errors=True)


def kept_settings(layout: Layout, version: int) -> bytes | None:
    try:
        return (local_dir(layout, version) / "settings.json").read_bytes()
    except FileNotFoundError:
        return None


def expected_settings_sha256(audit: AuditLog, version: int) -> str | None:
    """The digest the audit log last recorded for ``version``'s installed settings."""
    found = None
    for _, e in audit.entries():
        if e.get("version") == version and e.get("step") in _STEPS and e.get("result") == "ok" \
                and isinstance(e.get("settings_sha256"), str):
            found = str(e["settings_sha256"])
    return found
