"""``engineer enroll USER`` and ``engineer revoke USER``: who on this host may use the
model service through its relay.

The list is ``PREFIX/state/engineers.json`` (root-owned), in the format the relay
reads (``models.service._enrolment``: ``abhed-engineers/1``, each name with the uid it had
when enrolled).  The relay re-reads it on change: an enrolment or a revocation
holds from the engineer's next request.  Both verbs are idempotent and recorded in
the audit log.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pwd
import secrets
from pathlib import Path
from typing import Any

from .._audit import AuditLog
from .._errors import UsageError
from .._layout import Layout, atomic_write, lock_prefix, read_kept
from .._site_ca import host_paths
from .._ui import out

FORMAT = "abhed-engineers/1"
GATE_ENGINEER = "_abhed-gate"
"""As ``models.GATE_ENGINEER`` (tests/installer/test_model_access.py keeps them equal): the
name the health gate's requests are recorded under; the installer does not import models."""


def _load(path: Path) -> dict[str, Any]:
    raw = read_kept(path, FORMAT, what="enrolled engineers",
                    hint="The list was damaged; move it away and enroll them again.")
    return raw if raw is not None else {"format": FORMAT, "engineers": {}}


def run(args: argparse.Namespace) -> int:
    layout = Layout(args.prefix.absolute())
    audit = AuditLog(layout.audit_dir)
    path = host_paths(layout).engineers
    user = args.user
    base = {"run": secrets.token_hex(6), "user": user}
    with lock_prefix(layout.prefix, create=False):
        listing = _load(path)
        engineers: dict[str, Any] = listing.setdefault("engineers", {})
        if args.eng_verb == "enroll":
            if user == GATE_ENGINEER:
                audit.append("engineer", "enroll", "refused", **base, detail="reserved name")
                raise UsageError(f"{user!r} is the name the installer's health gate is "
                                 "recorded under on the model side; no engineer may take it")
            try:
                uid = pwd.getpwnam(user).pw_uid
            except KeyError:
                audit.append("engineer", "enroll", "refused", **base, detail="no such user")
                raise UsageError(f"there is no user {user!r} on this host; create the account "
                                 "first, then enroll it") from None
            if engineers.get(user, {}).get("uid") == uid:
                out(f"unchanged: {user} (uid {uid}) is enrolled already")
                return 0
            engineers[user] = {"uid": uid, "enrolled": datetime.datetime.now(datetime.UTC)
                               .isoformat(timespec="seconds")}
            step, fields = "enroll", {"uid": uid}
        else:
            if user not in engineers:
                out(f"unchanged: {user} is not enrolled")
                return 0
            del engineers[user]
            step, fields = "revoke", {}
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        atomic_write(path, (json.dumps(listing, indent=2, sort_keys=True) + "\n").encode(),
                     0o644)
        entry = audit.append("engineer", step, "ok", **base, **fields)
    out(f"{'enrolled' if step == 'enroll' else 'revoked'}: {user} "
        + ("may now use the model service through this host's relay" if step == "enroll"
           else "is refused by this host's relay from the next request"))
    out(f"audit head: {entry['hash']}")
    return 0
