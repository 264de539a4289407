"""``rollback [--to V]``: make an installed release current again, after its health gate.

The target's venv and files are already on disk, so this is the gate plus
the same atomic switch as install; a failed gate leaves ``current`` alone.
"""

from __future__ import annotations

import argparse

from .._deploy import check_site_change
from .._errors import NotInstalled, UsageError
from .._layout import State
from .._release import recovered
from .._roles import release_role
from .._site_install import (
    HostLinks,
    make_links,
    release_has_site,
    settings_digest,
    undo_links,
)
from .._steps import health_check_step, post_switch
from .._txn import Transaction, switch_current
from .._ui import out


def run(args: argparse.Namespace) -> int:
    with recovered(args.prefix, "rollback") as (layout, audit, run_id):
        state = State.load(layout)
        current = layout.current_version()
        installed = layout.installed_versions()
        if current is None:
            raise NotInstalled(f"nothing is current in {layout.prefix}; install first")
        target = args.to if args.to is not None else state.previous
        if target is None:
            raise UsageError(f"release {current} has no previous release to go back to; "
                             f"installed: {installed}")
        if target == current:
            out(f"release {target} is already current: nothing changed")
            return 0
        if target not in installed:
            raise NotInstalled(f"release {target} is not installed in {layout.releases} "
                               f"(installed: {', '.join(map(str, installed)) or 'none'})")
        role, _ = release_role(layout.release(target))
        base = {"run": run_id, "version": target, "role": role}
        audit.append("rollback", "start", "begun", **base, current=current)
        if role != (state.role or "all") and not args.switch_role:
            audit.append("rollback", "role", "refused", **base, host_role=state.role or "all")
            raise UsageError(f"release {target} was installed for role {role}; this host is "
                             f"role {state.role or 'all'}. Nothing was switched. Pass "
                             "--switch-role if that is meant (recorded)")
        has_site = release_has_site(layout.release(target))
        check_site_change(layout, current, has_site, args.drop_site_layer, audit, "rollback",
                          base)
        site_sha = settings_digest(layout.release(target))
        links = HostLinks.of(state)
        with Transaction(audit, "rollback", run_id, target) as tx:
            if args.skip_gate:
                audit.append("rollback", "gate", "skipped", **base, detail="--skip-gate")
            else:
                health_check_step(layout, layout.release(target), audit, "rollback", run_id, target,
                              accept_probe_failure=args.accept_probe_failure)
            switch_current(layout, target)
            tx.on_undo(f"switched current back to {current}",
                       lambda: switch_current(layout, current))
            audit.append("rollback", "switch", "ok", **base, previous=current)
            changes = make_links(layout, links, has_site)
            if changes:
                tx.on_undo("restored the host and PATH links", lambda: undo_links(changes))
                audit.append("rollback", "links", "ok", **base,
                             changed=[c.as_dict() for c in changes])
            post_switch(layout, audit, "rollback", run_id, target)
            old = state.copy()
            tx.on_undo("restored state", lambda: old.save(layout))
            state.previous, state.current = current, target
            state.role = role
            state.save(layout)
            tx.commit()
        entry = audit.append("rollback", "done", "ok", **base, previous=current,
                             site_settings_sha256=site_sha)
    out(f"rolled back: release {target} is current in {layout.prefix} (was {current})"
        + ("" if role == "all" else f"; role {role}"))
    out(f"site settings: sha256 {site_sha}" if site_sha else
        "site settings: none (this release carries none)")
    out(f"audit head: {entry['hash']}")
    return 0
