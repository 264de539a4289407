"""``uninstall [--keep-data]``: remove every release, the store, state and units.

The audit log is never removed (it is the proof of what happened, including
this uninstall); ``--keep-data`` also keeps ``PREFIX/data`` (the agent's
sessions and config).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys

from .._audit import AuditLog
from .._errors import NotInstalled, UsageError
from .._layout import Layout, State, lock_prefix
from .._proc import signals_blocked
from .._services import UNIT_NAME, systemctl, unit_path
from .._site_install import HostLinks, remove_links
from .._txn import remove_tree
from .._ui import out


def run(args: argparse.Namespace) -> int:
    layout = Layout(args.prefix.absolute())
    if not (layout.prefix / ".lock").exists() and not layout.releases.exists():
        raise NotInstalled(f"nothing is installed in {layout.prefix}")
    if not args.yes and sys.stdin.isatty():
        answer = input(f"remove Abhed from {layout.prefix}"
                       f"{' (keeping data/)' if args.keep_data else ' including data/'}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise UsageError("not confirmed: nothing was removed")
    audit = AuditLog(layout.audit_dir)
    run_id = secrets.token_hex(6)
    with lock_prefix(layout.prefix, create=False):
        state = State.load(layout)
        audit.append("uninstall", "start", "begun", run=run_id, current=state.current,
                     keep_data=args.keep_data)
        # Past this point a half-done uninstall is worse than a finished one: finish it.
        with signals_blocked():
            stopped = systemctl("disable", "--now", UNIT_NAME)
            unit_path().unlink(missing_ok=True)
            systemctl("daemon-reload")
            removed = remove_links(layout, HostLinks.of(state))
            for p in [layout.current, layout.bin, layout.releases, layout.store.parent,
                      layout.state_dir, layout.logs] + ([] if args.keep_data else [layout.data]):
                if p.exists() or p.is_symlink():
                    remove_tree(p)
                    removed.append(os.path.relpath(p, layout.prefix))
            entry = audit.append("uninstall", "done", "ok", run=run_id, removed=removed,
                                 kept=["audit"] + (["data"] if args.keep_data else []),
                                 service=stopped)
    out(f"uninstalled from {layout.prefix}: removed {', '.join(removed) or 'nothing'}; kept "
        f"audit/{' and data/' if args.keep_data else ''}")
    out(f"audit head: {entry['hash']}")
    return 0
