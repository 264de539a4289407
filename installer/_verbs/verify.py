"""``verify BUNDLE``: signature, then every member's length and digest, nothing written."""

from __future__ import annotations

import argparse
import contextlib
import secrets

from .._audit import AuditLog
from .._layout import Layout, State, lock_prefix
from .._release import bundle_error
from .._trust import resolve_trust
from .._ui import Progress, emit_json, out


def run(args: argparse.Namespace) -> int:
    from bundle import BundleError, verify_bundle

    layout = Layout(args.prefix.absolute())
    installed = layout.prefix.is_dir()
    policy, pinned = resolve_trust(layout if installed else None, args.trust, args.threshold)
    state = State.load(layout) if installed else State()
    audit = AuditLog(layout.audit_dir) if installed else None
    lock = lock_prefix(layout.prefix, create=False) if installed else contextlib.nullcontext()
    run_id = secrets.token_hex(6)
    with lock:
        try:
            vb = verify_bundle(args.bundle, policy, installed_version=state.highest,
                               allow_downgrade=args.allow_downgrade, progress=Progress("verify"))
        except BundleError as exc:
            if audit is not None:
                audit.append("verify", "verify", "refused", run=run_id,
                             bundle=str(args.bundle.absolute()), detail=str(exc))
            raise bundle_error(exc) from None
        m = vb.manifest
        if audit is not None:
            audit.append("verify", "verify", "ok", run=run_id, bundle=str(args.bundle.absolute()),
                         version=m.version, downgrade=vb.downgrade or None)
    info = {"name": m.name, "version": m.version, "members": len(m.members),
            "bytes": m.payload_size, "signers": list(vb.signers), "downgrade": vb.downgrade,
            "pinned_keys": pinned, "platform": m.platform.model_dump(mode="json")}
    if args.json:
        emit_json(info)
    else:
        out(f"verified: {m.name} version {m.version}: {len(m.members)} members, "
            f"{m.payload_size / (1 << 20):.1f} MiB, signed by {', '.join(vb.signers)}"
            f" ({'pinned keys' if pinned else 'keys from --trust'})")
        if vb.downgrade:
            out(f"note: version {m.version} is older than installed {state.highest} "
                "(--allow-downgrade)")
    return 0
