"""``repair``: put the current release's site layer back as it was installed.

What ``check`` finds changed, replaced, re-owned, chmod-ed or removed in the
site layer (``site/settings.json``, ``site/origin.json``, the directory, the
venv's link, the host and PATH links) is rewritten from the release's own
verified bundle files (``installer._site_install.vouched``), or, for a release the
operator tightened, from the tightening kept in ``state/site-local/`` when its
digest is the one the audit log last recorded; otherwise repair refuses and
says to reinstall.  Everything else ``check`` may find (the venv, the model)
needs a reinstall: repair does not touch it.  What was replaced is recorded in
the audit log (the digests of the files as found), so the evidence survives.
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
from pathlib import Path

from foundation import digest_file

from .._audit import AuditLog
from .._errors import CheckFailed, NotInstalled
from .._layout import Layout, State, lock_prefix
from .._local import expected_settings_sha256, kept_settings
from .._site_install import SITE_DIR, HostLinks, make_links, release_has_site, vouched, write_site
from .._ui import out


def _digest(path: Path) -> str | None:
    try:
        return digest_file(path).sha256 if path.is_file() else None
    except OSError:
        return None


def run(args: argparse.Namespace) -> int:
    layout = Layout(args.prefix.absolute())
    audit = AuditLog(layout.audit_dir)
    run_id = secrets.token_hex(6)
    with lock_prefix(layout.prefix, create=False):
        version = layout.current_version()
        if version is None:
            raise NotInstalled(f"nothing is current in {layout.prefix}")
        rel = layout.release(version)
        if not (rel / "bundle/site/settings.json").exists() and not release_has_site(rel):
            out(f"release {version} carries no site settings: nothing to repair")
            return 0
        v = vouched(layout, audit, version)
        want = expected_settings_sha256(audit, version) or hashlib.sha256(v.signed).hexdigest()
        data = v.signed
        if hashlib.sha256(data).hexdigest() != want:  # tightened on this host
            data = kept_settings(layout, version) or b""
            if hashlib.sha256(data).hexdigest() != want:
                raise CheckFailed(f"release {version} was tightened on this host, and the kept "
                                  f"copy of the tightened settings ({layout.state_dir}/site-local/"
                                  f"{version}/settings.json) no longer has the digest the audit log "
                                  "recorded: `abhed-installer site reset`, then tighten again")
        found = {name: _digest(rel / SITE_DIR / name) for name in ("settings.json", "origin.json")}
        write_site(rel, layout, data, v.origin(want))
        changes = make_links(layout, HostLinks.of(State.load(layout)), True)
        entry = audit.append("repair", "done", "ok", run=run_id, version=version,
                             found_sha256=found, settings_sha256=want,
                             links=[c.as_dict() for c in changes] or None)
    out(f"repaired: release {version}'s site layer is as installed (settings sha256 {want}); "
        "run `abhed-installer check` to confirm")
    out(f"audit head: {entry['hash']}")
    return 0
