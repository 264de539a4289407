"""``preflight BUNDLE``: the host against the bundle's signed platform; writes nothing."""

from __future__ import annotations

import argparse

from .._errors import PreflightFailed
from .._layout import Layout, State
from .._preflight import platform_checks
from .._release import read_manifest
from .._roles import choose_role
from .._site import HostLinks, site_checks
from .._trust import resolve_trust
from .._ui import emit_json, out


def run(args: argparse.Namespace) -> int:
    layout = Layout(args.prefix.absolute())
    policy, _ = resolve_trust(layout if layout.prefix.is_dir() else None, args.trust,
                              args.threshold)
    manifest, _, _ = read_manifest(args.bundle.absolute(), policy)
    state = State.load(layout) if layout.prefix.is_dir() else State()
    installed = layout.current_version() is not None if layout.prefix.is_dir() else False
    role = choose_role("upgrade" if installed else "install", args.role, args.switch_role,
                       state.role, manifest.host_roles)
    manifest = manifest.for_role(role)
    checks, _ = platform_checks(manifest, layout.prefix, python=args.python, role=role)
    links = HostLinks.choose(layout, args.host_link, args.bin_link, HostLinks.of(state))
    checks += site_checks(manifest, layout, links)
    failed = [c for c in checks if c.status == "fail"]
    if args.json:
        emit_json({"name": manifest.name, "version": manifest.version, "role": role,
                   "ok": not failed, "checks": [c.as_dict() for c in checks]})
    else:
        p = manifest.platform
        out(f"preflight: {manifest.name} {manifest.version} for {p.os} {p.arch}, glibc >= "
            f"{p.glibc}, CPython {p.python}, {p.accelerator}"
            + ("" if role == "all" else f"; role {role}"))
        for c in checks:
            line = f"  {c.status.upper():4}  {c.name:16} found {c.found}; needs {c.needed}"
            if c.status in ("fail", "warn") and c.fix:
                line += f"\n        do: {c.fix}"
            out(line)
        out("the model's own needs (system packages, GPU memory in its abhed-serve.json) are "
            "checked during install, right after the bundle is verified")
    if failed:
        raise PreflightFailed(f"{len(failed)} check(s) failed: "
                              f"{', '.join(c.name for c in failed)}")
    return 0
