"""``status``: installed releases, which is current, the service, the model, the audit tail."""

from __future__ import annotations

import argparse
import os
from typing import Any

from foundation import FoundationError, digest_file, read_document, read_regular
from foundation.site_files import MAX_SITE_BYTES, ORIGIN_FILE, SiteOrigin, read_origin

from .._audit import AuditLog
from .._errors import AuditBroken, NotInstalled
from .._layout import MAX_KEPT_BYTES, Layout, State
from .._local import local_overlay
from .._roles import ReplicaPlan, release_replica, release_role, release_router
from .._site_install import SITE_DIR, HostLinks, link_problems, settings_digest
from .._ui import emit_json, out


def _release_info(layout: Layout, v: int) -> dict[str, Any]:
    rel = layout.release(v)
    info: dict[str, Any] = {"version": v, "path": str(rel)}
    try:  # foundation's one reader: a duplicate key, a cut or oversized file is unreadable
        body = read_document(rel / "release.json", what="release record", cap=MAX_KEPT_BYTES,
                             syntax="json")
        info.update(installed_at=body.get("installed_at"), downgrade=body.get("downgrade"),
                    name=body.get("name"), role=body.get("role") or "all")
    except (OSError, FoundationError):
        info["problem"] = "release.json unreadable"
    served = sorted(rel.glob("bundle/models/*/abhed-serve.json"))
    if served:
        try:
            info["model"] = read_document(served[0], what="serve descriptor", cap=MAX_KEPT_BYTES,
                                          syntax="json").get("served_name")
        except (OSError, FoundationError):
            info["model"] = None
    return info


def _service(replica: ReplicaPlan | None = None) -> dict[str, Any]:
    """The model service's unit and health: on loopback, or behind another host's router
    where the install put it (the replica's address and port)."""
    from .._health import loopback_get
    from .._services import DEFAULT_PORT, UNIT_NAME, systemctl, systemd_present

    port = int(os.environ.get("ABHED_MODEL_PORT") or DEFAULT_PORT)
    host = "127.0.0.1"
    if replica is not None:
        host, port = replica.address, replica.port
    svc: dict[str, Any] = {"systemd": systemd_present(), "unit": UNIT_NAME, "host": host,
                           "port": port}
    state = systemctl("is-active", UNIT_NAME)
    svc["unit_state"] = state if state is not None else "n/a"
    shown = f"[{host}]" if ":" in host else host
    try:
        svc["health"] = "ok" if loopback_get(f"http://{shown}:{port}/health", 2.0)[0] == 200 \
            else "unhealthy"
    except OSError:
        svc["health"] = "not answering"
    return svc


def serving_part(layout: Layout, current: int | None, role: str | None) -> tuple[str, dict[str, Any]]:
    """What this model host does behind the site's router, as a phrase for the role line
    and as JSON: it runs the router over the replicas, it serves one of them, or neither."""
    if current is None or role not in ("model", "all"):
        return "", {}
    release = layout.release(current)
    replica = release_replica(release)
    if replica is not None:
        return (f" (behind the router on {replica.router_host}, serving {replica.url})",
                {"replica": replica.as_json()})
    plan = release_router(release, role, layout.current)
    if plan is not None:
        return (f" (runs the router over {len(plan.replicas)} model hosts: "
                f"{', '.join(plan.replicas)})", {"router": list(plan.replicas)})
    return "", {}


def _site(layout: Layout, state: State, current: int | None) -> dict[str, Any]:
    """The site settings in force: the current release's, as installed, and its links."""
    rel = layout.release(current) if current is not None else None
    digest = settings_digest(rel) if rel is not None else None
    origin: SiteOrigin | None = None
    links = HostLinks.of(state)
    problems = link_problems(layout, links, digest is not None) if rel is not None else []
    if rel is not None and digest is not None:
        try:
            origin = read_origin(read_regular(rel / SITE_DIR / ORIGIN_FILE, MAX_SITE_BYTES,
                                              "site origin"), rel / SITE_DIR / ORIGIN_FILE)
        except (OSError, FoundationError) as exc:
            problems.append(f"{exc} (the agent refuses to start)")
    if origin is not None and origin.settings_sha256 != digest:
        problems.append("origin.json does not name these settings' digest (the agent refuses "
                        "to start)")
    signed = None
    if rel is not None and digest is not None:
        staged = rel / "bundle" / "site" / "settings.json"
        signed = digest_file(staged).sha256 if staged.is_file() else None
    tightened = current is not None and local_overlay(layout, current) is not None
    return {"settings_sha256": digest, "site": origin.site if origin is not None else None,
            "settings": str(layout.current / "site" / "settings.json") if digest else None,
            "signed_sha256": signed, "tightened_locally": tightened,
            "host_link": str(links.site) if links.site else None,
            "bin_link": str(links.bin) if links.bin else None, "problems": problems}


def run(args: argparse.Namespace) -> int:
    layout = Layout(args.prefix.absolute())
    if not layout.prefix.is_dir():
        raise NotInstalled(f"nothing is installed in {layout.prefix}")
    state = State.load(layout)
    current = layout.current_version()
    audit = AuditLog(layout.audit_dir)
    try:
        report = audit.verify()
        chain = {"ok": True, "entries": report.entries, "head": report.head}
    except AuditBroken as exc:
        chain = {"ok": False, "problem": str(exc)}
    releases = [_release_info(layout, v) for v in layout.installed_versions()]
    try:
        last = audit.last(5)
    except AuditBroken:
        last = []
    last_audit = [{k: e.get(k) for k in ("seq", "time", "action", "step", "result", "version")}
                  for e in last]
    site = _site(layout, state, current)
    role, endpoints = release_role(layout.release(current)) if current is not None else (None, ())
    part, serving = serving_part(layout, current, role)
    svc = _service(release_replica(layout.release(current)) if current is not None else None)
    info: dict[str, Any] = {"prefix": str(layout.prefix), "name": state.name, "current": current,
            "role": role, "model_endpoints": list(endpoints), **serving,
            "previous": state.previous, "highest": state.highest, "releases": releases,
            "service": svc, "site": site, "audit": chain, "last_audit": last_audit}
    if args.json:
        emit_json(info)
        return 0
    out(f"prefix: {layout.prefix} ({state.name or 'nothing installed'})")
    for r in releases:
        mark = "*" if r["version"] == current else " "
        out(f" {mark} release {r['version']}  installed {r.get('installed_at')}  model "
            f"{r.get('model')}" + ("  (downgrade)" if r.get("downgrade") else ""))
    previous = "none" if state.previous is None else state.previous
    out(f"current: {current}   previous: {previous}   highest ever: {state.highest}")
    if role not in (None, "all") or part:
        out(f"role: {role}" + (f" (the site's model service: {', '.join(endpoints)})"
                               if role == "agent" else part))
    if role == "agent":
        out("service: none on this host (role agent)")
    else:
        where = f"systemd {svc['unit']} {svc['unit_state']}" if svc["systemd"] \
            else "no systemd (run script)"
        out(f"service: {where}; model server on {svc['host']}:{svc['port']}: {svc['health']}")
    if site["settings_sha256"]:
        out(f"site settings: sha256 {site['settings_sha256']} (site {site['site']}, release "
            f"{current}) at {site['settings']}")
        if site["tightened_locally"]:
            out(f"  tightened on this host (abhed-installer site tighten); signed: sha256 "
                f"{site['signed_sha256']}")
        out(f"  found by every abhed on the host via {site['host_link'] or 'the venv link only'}"
            + ("" if not site["problems"] else f"; PROBLEM: {'; '.join(site['problems'])} "
               "(abhed-installer check)"))
    else:
        out("site settings: none (the current release carries no [agent] table)")
    if site["bin_link"]:
        out(f"on engineers' PATH: {site['bin_link']} -> {layout.bin / 'abhed'}")
    out("audit: " + (f"chain ok, {chain['entries']} entries, head {chain['head']}" if chain["ok"]
                     else f"BROKEN: {chain['problem']}"))
    for e in last_audit:
        out(f"  #{e['seq']} {e['time']} {e['action']} {e['step']} {e['result']}"
            + (f" (release {e['version']})" if e.get("version") is not None else ""))
    return 0
