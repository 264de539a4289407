"""``audit verify`` and ``audit show``."""

from __future__ import annotations

import argparse

from .._audit import AuditLog
from .._layout import Layout
from .._ui import emit_json, out


def run(args: argparse.Namespace) -> int:
    layout = Layout(args.prefix.absolute())
    log = AuditLog(layout.audit_dir)
    if args.audit_verb == "verify":
        report = log.verify()
        if args.json:
            emit_json({"ok": True, "entries": report.entries, "head": report.head})
        else:
            out(f"audit chain ok: {report.entries} entries, head {report.head}")
        return 0
    entries = log.last(max(1, min(args.n, 10_000)))
    if args.json:
        emit_json(entries)
    else:
        for e in entries:
            who = e.get("who", {})
            out(f"#{e.get('seq')} {e.get('time')} {who.get('user')}@{who.get('host')} "
                f"{e.get('action')} {e.get('step')} {e.get('result')}"
                + (f" release {e['version']}" if e.get("version") is not None else ""))
    return 0
