"""``site tighten FILE`` and ``site reset``: narrow the current release's site settings on
this host, or go back to the signed ones (``installer._local`` says why only so)."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from .._errors import NotInstalled, UsageError
from .._layout import Layout
from .._local import forget, keep, narrow, read_overlay
from .._release import recovered, write_record
from .._site_install import SITE_DIR, release_has_site, settings_digest, vouched, write_site
from .._ui import out


def _swap(rel: Path, layout: Layout, settings: bytes, origin: bytes) -> None:
    """Write both site files; on any failure put the old ones back (never half of each)."""
    old = {n: (rel / SITE_DIR / n).read_bytes() for n in ("settings.json", "origin.json")}
    try:
        write_site(rel, layout, settings, origin)
    except BaseException:
        write_site(rel, layout, old["settings.json"], old["origin.json"])
        raise


def run(args: argparse.Namespace) -> int:
    with recovered(args.prefix, "site") as (layout, audit, run_id):
        version = layout.current_version()
        if version is None:
            raise NotInstalled(f"nothing is current in {layout.prefix}")
        rel = layout.release(version)
        if not release_has_site(rel):
            raise UsageError(f"release {version} carries no site settings: there is nothing to "
                             "narrow (gather a bundle with an [agent] table)")
        v = vouched(layout, audit, version)
        signed_sha = hashlib.sha256(v.signed).hexdigest()
        before = settings_digest(rel)
        base = {"run": run_id, "version": version}
        changes: list[str] = []
        if args.site_verb == "reset":
            if before == signed_sha:
                out(f"release {version} runs its signed settings already: nothing changed")
                return 0
            _swap(rel, layout, v.signed, v.origin())
            forget(layout, version)
            step, fields = "reset", {"settings_sha256": signed_sha, "previous_sha256": before}
        else:
            overlay = read_overlay(args.file)
            try:
                effective, changes = narrow(rel, layout, overlay, str(args.file))
            except UsageError as exc:
                audit.append("site", "tighten", "refused", **base, file=str(args.file.absolute()),
                             detail=str(exc)[:4000])
                raise
            digest = hashlib.sha256(effective).hexdigest()
            if digest == before:
                out(f"release {version}'s settings already say that: nothing changed")
                return 0
            overlay_sha = keep(layout, version, overlay, effective)
            _swap(rel, layout, effective, v.origin(digest))
            step, fields = "tighten", {"settings_sha256": digest, "signed_sha256": signed_sha,
                                       "previous_sha256": before, "overlay_sha256": overlay_sha,
                                       "file": str(args.file.absolute())}
        record_sha, release_sha = write_record(rel, v.manifest)
        audit.append("site", "recorded", "ok", **base, record_sha256=record_sha,
                     release_sha256=release_sha)
        entry = audit.append("site", step, "ok", **base, **fields)
    now = fields["settings_sha256"]
    if step == "reset":
        out(f"reset: release {version} runs its signed settings again (sha256 {now})")
    else:
        for line in changes:
            out(f"narrower than signed: {line}")
        out(f"tightened: release {version}'s site settings are now sha256 {now} (signed: "
            f"{signed_sha}); every engineer's next session runs under them")
    out(f"audit head: {entry['hash']}")
    return 0
