"""install and upgrade: verify, preflight, stage, gate, switch, record.

One pipeline serves both verbs; they differ in what must already be there.

1. the manifest's signatures against the pinned keys (the payload is not read);
2. name and anti-rollback against what this host has installed;
3. preflight against the signed platform;
4. stage ``releases/<version>/``: the members unpacked and hashed in one pass,
   the model's declared needs checked, unchanged weights linked from the store,
   a venv built by pip offline with hashes required, the run script, the
   unit, the record of every file;
5. the health gate on the staged release (its own model server and agent);
6. the atomic switch of ``current``; with systemd, the service restarted and
   its health awaited, else switched back;
7. state and audit.

Steps 1-3 are :func:`_admit` (nothing on the host changes), which also settles the
host's role (``installer._roles``): what it installs, and whether the bundle changes
anything for it at all; 4-7 are the steps of :data:`installer._stage.STEPS`, run by one
transaction.

Any failure or interrupt before the end undoes every step in reverse: the
release directory is removed, ``current`` points where it pointed, units and
state are as they were.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ._audit import AuditLog
from ._errors import DowngradeRefused, NotInstalled, UsageError
from ._layout import Layout, State, lock_prefix
from ._release import disk_error, read_manifest, recover
from ._roles import choose_role, same_for_role
from ._site_install import HostLinks, release_has_site, site_checks
from ._stage import STEPS, Staging
from ._steps import fail_preflight
from ._txn import Transaction
from ._ui import out, say

__all__ = ["DeployOptions", "deploy"]


@dataclass(frozen=True)
class DeployOptions:
    bundle: Path
    prefix: Path
    trust: tuple[Path, ...]
    threshold: int | None
    allow_downgrade: bool
    python: str | None
    skip_gate: bool
    accept_probe_failure: str | None = None
    host_link: Path | None = None  # --host-link (installer._site_install)
    bin_link: Path | None = None  # --bin-link
    drop_site_layer: bool = False  # --drop-site-layer
    drop_local_settings: bool = False  # --drop-local-settings (installer._local)
    role: str | None = None  # --role (installer._roles)
    switch_role: bool = False  # --switch-role


def deploy(opts: DeployOptions, action: Literal["install", "upgrade"]) -> int:
    """Admit the bundle (signatures, version, preflight), then run :data:`STEPS` in one
    transaction: any failure or interrupt undoes every step done so far, in reverse."""
    layout = Layout(opts.prefix.absolute())
    if any(c.isspace() for c in str(layout.prefix)):
        raise UsageError(f"prefix {layout.prefix} contains white space; choose one without")
    audit = AuditLog(layout.audit_dir)
    run = secrets.token_hex(6)
    with lock_prefix(layout.prefix, create=action == "install"):
        staging = _admit(opts, action, layout, audit, run)
        if staging is None:
            return 0
        with Transaction(audit, action, run, staging.version) as tx:
            try:
                tx.run(STEPS, staging)
            except OSError as exc:
                raise disk_error(exc, layout.prefix) from None
        entry = audit.append(action, "done", "ok", **staging.base, previous=staging.current,
                             trust_pinned_sha256=staging.trust_sha,
                             site_settings_sha256=staging.site_sha)
    _summary(layout, action, staging, entry["hash"])
    return 0


def _admit(opts: DeployOptions, action: str, layout: Layout, audit: AuditLog,
           run: str) -> Staging | None:
    """Everything checked before the host is touched; ``None`` when there is nothing to do."""
    from ._preflight import platform_checks
    from ._trust import resolve_trust

    recover(layout, audit, action, run)
    state = State.load(layout)
    current = layout.current_version()
    if action == "install" and current is not None:
        raise UsageError(f"release {current} is already installed in {layout.prefix}; use "
                         "`abhed-installer upgrade BUNDLE` to move to another version")
    if action == "upgrade" and current is None:
        raise NotInstalled(f"nothing is installed in {layout.prefix}; use `abhed-installer "
                           "install BUNDLE` first")
    policy, pinned = resolve_trust(layout, opts.trust, opts.threshold)
    bundle = opts.bundle.absolute()
    base: dict[str, Any] = {"run": run, "bundle": str(bundle)}
    audit.append(action, "start", "begun", **base, prefix=str(layout.prefix),
                 current=current, fault=os.environ.get("ABHED_INSTALLER_FAULT") or None)
    try:
        manifest, signers, manifest_sha = read_manifest(bundle, policy)
    except Exception as exc:
        audit.append(action, "verify", "refused", **base, detail=str(exc))
        raise
    v = manifest.version
    base["version"] = v
    audit.append(action, "signature", "ok", **base, name=manifest.name, signers=list(signers))
    if state.name is not None and manifest.name != state.name:
        audit.append(action, "verify", "refused", **base, detail="other product name")
        raise UsageError(f"this prefix holds {state.name!r}; the bundle is {manifest.name!r}. "
                         "Install it in another --prefix, or uninstall first")
    if v == current:
        audit.append(action, "done", "unchanged", **base)
        out(f"release {v} is already current in {layout.prefix}: nothing changed")
        return None
    try:
        role = choose_role(action, opts.role, opts.switch_role, state.role, manifest.host_roles)
    except UsageError as exc:
        audit.append(action, "role", "refused", **base, detail=str(exc))
        raise
    base["role"] = role
    signed, manifest = manifest, manifest.for_role(role)
    if current is not None and role != "all" and not opts.switch_role \
            and same_for_role(manifest, layout.release(current), role):
        audit.append(action, "done", "unchanged", **base,
                     detail=f"nothing to do for role {role}: release {current} holds the same "
                     "files")
        out(f"nothing to do for role {role}: bundle version {v} changes none of this role's "
            f"files; release {current} stays current in {layout.prefix}")
        return None
    downgrade = state.highest is not None and v < state.highest
    if downgrade and not opts.allow_downgrade:
        audit.append(action, "version", "refused", **base, highest=state.highest)
        raise DowngradeRefused(
            f"bundle version {v} is older than version {state.highest} already installed "
            f"here: refused as a possible rollback attack. To go back to a release that is "
            f"still on disk use `abhed-installer rollback`; to install this older bundle "
            "anyway pass --allow-downgrade (recorded in the audit log)")
    if downgrade:
        audit.append(action, "version", "downgrade-allowed", **base, highest=state.highest)
    if layout.release(v).is_dir():
        raise UsageError(f"release {v} is already on disk in {layout.releases} but not "
                         f"current; switch to it with `abhed-installer rollback --to {v}`")
    check_site_change(layout, current, manifest.site is not None, opts.drop_site_layer,
                      audit, action, base)
    say(f"preflight for {manifest.name} {v} ({manifest.platform.arch}, "
        f"{manifest.platform.accelerator})" + ("" if role == "all" else f", role {role}"))
    checks, py = platform_checks(manifest, layout.prefix, python=opts.python, role=role)
    links = HostLinks.choose(layout, opts.host_link, opts.bin_link, HostLinks.of(state))
    checks += site_checks(manifest, layout, links)
    fail_preflight(checks, audit, action, run, v)
    assert py is not None
    audit.append(action, "preflight", "ok", **base,
                 warnings=[c.as_dict() for c in checks if c.status == "warn"] or None)
    return Staging(layout=layout, audit=audit, action=action, run=run, base=base, bundle=bundle,
                   policy=policy, pinned=pinned, manifest=manifest, signers=signers, state=state,
                   current=current, python=py.executable, skip_gate=opts.skip_gate,
                   allow_downgrade=opts.allow_downgrade,
                   accept_probe_failure=opts.accept_probe_failure, manifest_sha256=manifest_sha,
                   links=links, drop_local=opts.drop_local_settings, role=role,
                   only=signed.role_files(role))


def check_site_change(layout: Layout, current: int | None, has_site: bool, drop: bool,
                      audit: AuditLog, action: str, base: dict[str, Any]) -> None:
    """Switching from a release with site settings to one without would leave every
    engineer's abhed with no site layer: refused unless the operator says so."""
    had_site = current is not None and release_has_site(layout.release(current))
    if had_site and not has_site and not drop:
        audit.append(action, "site", "refused", **base, detail="would drop the site layer")
        raise UsageError(f"release {current} carries site settings and the release to switch "
                         "to carries none: every engineer's abhed would run with no site "
                         "layer. Gather the bundle with an [agent] table, or pass "
                         "--drop-site-layer if that is what you mean (recorded)")
    if drop and (has_site or not had_site):
        raise UsageError("--drop-site-layer is for switching from a release with site settings "
                         "to one without; nothing would be dropped here")


def _summary(layout: Layout, action: str, s: Staging, head: str) -> None:
    from ._services import RUN_SCRIPT, UNIT_NAME, systemd_present

    verb = "installed" if action == "install" else "upgraded"
    out(f"{verb}: release {s.version} is current in {layout.prefix}"
        + (f" (was {s.current})" if s.current is not None else ""))
    out(f"agent: {layout.bin / 'abhed'}"
        + (f" (on PATH as {s.links.bin})" if s.links.bin else ""))
    if s.site_sha is not None:
        where = f"{s.links.site} -> " if s.links.site else ""
        out(f"site settings: sha256 {s.site_sha} ({where}{layout.current / 'site'})")
    elif s.role == "model":
        out("site settings: none (role model: nobody works on this host)")
    else:
        out("site settings: none (this bundle carries no [agent] table)")
    if s.role == "agent":
        out("role: agent (no weights, no vLLM, no model service here; the site's model "
            f"service: {', '.join(s.manifest.roles.model_endpoints)})")
        out(f"audit head: {head}")
        return
    if s.role == "model":
        out("role: model (no microVM image, no site settings)")
    if systemd_present():
        out(f"service: {UNIT_NAME} (start: systemctl enable --now {UNIT_NAME})")
    else:
        out(f"service: no systemd on this host; start the model server with "
            f"{layout.current / RUN_SCRIPT} under your supervisor")
    out(f"audit head: {head}")
