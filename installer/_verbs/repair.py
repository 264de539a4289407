"""``repair``: put the current release's site layer back as it was installed.

What ``check`` finds changed, replaced, re-owned, chmod-ed or removed in the
site layer (``site/settings.json``, ``site/origin.json``, the directory, the
venv's link, the host and PATH links) is rewritten from the release's own
verified bundle files.  Those are trusted only as far as the audit log
vouches: release.json's sha256 must be the one recorded at install (the
chain is verified first), and the staged settings member must still have the
signed manifest's sha256; otherwise repair refuses and says to reinstall.
Everything else ``check`` may find (the venv, the model) needs a reinstall:
repair does not touch it.  What was replaced is recorded in the audit log
(the digests of the files as found), so the evidence survives the repair.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
from pathlib import Path

from foundation import digest_file

from .._audit import AuditLog
from .._errors import CheckFailed, NotInstalled
from .._layout import Layout, State, lock_prefix
from .._site import (
    SITE_DIR,
    HostLinks,
    make_links,
    origin_body,
    release_has_site,
    write_site,
)
from .._ui import out
from .check import recorded_entry


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def run(args: argparse.Namespace) -> int:
    from bundle import Manifest

    layout = Layout(args.prefix.absolute())
    audit = AuditLog(layout.audit_dir)
    run_id = secrets.token_hex(6)
    with lock_prefix(layout.prefix, create=False):
        version = layout.current_version()
        if version is None:
            raise NotInstalled(f"nothing is current in {layout.prefix}")
        rel = layout.release(version)
        audit.verify()
        entry = recorded_entry(audit, version)
        release_json = rel / "release.json"
        if entry is None or digest_file(release_json).sha256 != entry.get("release_sha256"):
            raise CheckFailed(f"{release_json} is not the one recorded in the audit log: the "
                              "release cannot vouch for its own files; reinstall it from its "
                              "bundle (uninstall --keep-data, install)")
        body = json.loads(release_json.read_bytes())
        manifest = Manifest.model_validate_json(json.dumps(body["manifest"]))
        member = manifest.settings_member()
        staged = rel / "bundle" / "site" / "settings.json"
        if member is None:
            out(f"release {version} carries no site settings: nothing to repair")
            return 0
        data = staged.read_bytes() if staged.is_file() else b""
        if hashlib.sha256(data).hexdigest() != member.content_sha256:
            raise CheckFailed(f"{staged} no longer has the signed sha256 either: reinstall the "
                              "release from its bundle (uninstall --keep-data, install)")
        found = {name: _digest(rel / SITE_DIR / name) for name in ("settings.json", "origin.json")}
        write_site(rel, layout, data, origin_body(manifest, tuple(body["signers"]),
                                                  str(body["manifest_sha256"])))
        changes = make_links(layout, HostLinks.of(State.load(layout)), release_has_site(rel))
        entry = audit.append("repair", "done", "ok", run=run_id, version=version,
                             found_sha256=found, settings_sha256=member.content_sha256,
                             links=[c.as_dict() for c in changes] or None)
    out(f"repaired: release {version}'s site layer is as installed (settings sha256 "
        f"{member.content_sha256}); run `abhed-installer check` to confirm")
    out(f"audit head: {entry['hash']}")
    return 0
