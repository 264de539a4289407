"""The transactional part of install/upgrade as a list of steps (pipx's way).

Each :class:`~installer._txn.Step` names what it does, how it is undone and
which fault points it holds; :data:`STEPS` is run in order by
:meth:`Transaction.run <installer._txn.Transaction.run>`, and
:data:`FAULT_POINTS` (what ``ABHED_INSTALLER_FAULT`` may name, listed in
docs/installer.md) is derived from it, so a new step cannot forget its
fault point or its undo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._audit import AuditLog
from ._errors import BundleRefused, HealthCheckFailed
from ._layout import Layout, State
from ._release import build_venv, bundle_error, reuse_weights, write_record, write_release_json
from ._site_install import HostLinks, LinkChange, install_site, make_links, undo_links
from ._steps import fail_preflight, health_check_step, post_switch
from ._txn import Step, gc_store, remove_tree, switch_current
from ._ui import Progress, say

__all__ = ["FAULT_POINTS", "STEPS", "Staging"]


@dataclass
class Staging:
    """What the steps share: the admitted bundle, the host's state, and what each step made."""

    layout: Layout
    audit: AuditLog
    action: str
    run: str
    base: dict[str, Any]
    bundle: Path
    policy: Any  # bundle.TrustPolicy
    pinned: bool
    manifest: Any  # bundle.Manifest
    signers: tuple[str, ...]
    state: State
    current: int | None
    python: str
    skip_gate: bool
    allow_downgrade: bool
    downgrade: bool = False
    descriptor: Any = None  # installer._descriptor.Descriptor
    descriptor_path: Path | None = None
    units: list[tuple[Path, bytes | None]] = field(default_factory=list)  # (path, old content)
    replica: Any = None  # installer._roles.ReplicaPlan: this host's vLLM behind another's router
    old_state: State | None = None
    trust_sha: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    accept_probe_failure: str | None = None  # --accept-probe-failure REASON
    manifest_sha256: str = ""
    links: HostLinks = HostLinks(None, None)  # installer._site_install: the host and PATH links
    site_sha: str | None = None  # the release's installed settings (None: it has none)
    link_changes: list[LinkChange] = field(default_factory=list)
    drop_local: bool = False  # --drop-local-settings
    role: str = "all"  # installer._roles: what this host installs
    only: frozenset[str] | None = None  # the members the role unpacks (None: every one)

    @property
    def version(self) -> int:
        return int(self.manifest.version)

    @property
    def release(self) -> Path:
        return self.layout.release(self.version)

    def audited(self, step: str, outcome: str, **fields: Any) -> None:
        self.audit.append(self.action, step, outcome, **self.base, **fields)


def _make_release(s: Staging) -> None:
    s.layout.releases.mkdir(parents=True, exist_ok=True)
    s.layout.logs.mkdir(parents=True, exist_ok=True)
    s.release.mkdir()


def _drop_release(s: Staging) -> None:
    from ._local import forget
    from ._probe import forget_probe

    remove_tree(s.release)
    forget(s.layout, s.version)  # a tightening carried over to it
    forget_probe(s.layout, s.version)  # the probe record its gate kept or took over
    gc_store(s.layout)


def _verify(s: Staging) -> None:
    from bundle import BundleError, verify_bundle

    say(f"verifying and unpacking into {s.release}/bundle")
    try:
        vb = verify_bundle(s.bundle, s.policy, installed_version=s.state.highest,
                           allow_downgrade=s.allow_downgrade, stage_to=s.release / "bundle",
                           progress=Progress("verify"), only=s.only)
    except BundleError as exc:
        s.audited("verify", "refused", detail=str(exc))
        raise bundle_error(exc) from None
    s.downgrade = vb.downgrade
    skipped = [m for m in vb.manifest.members if s.only is not None and m.name not in s.only]
    s.audited("verify", "ok", downgrade=vb.downgrade or None,
              not_unpacked_files=len(skipped) or None,
              not_unpacked_bytes=sum(m.content_size for m in skipped) or None)
    if skipped:
        say(f"role {s.role}: {len(skipped)} member(s) verified but not unpacked "
            f"({sum(m.content_size for m in skipped) / (1 << 20):,.1f} MiB: what other roles "
            "install)")


def _stage(s: Staging) -> None:
    from ._descriptor import find_descriptor, load_descriptor
    from ._preflight import descriptor_checks

    # Weights first: the model-server declaration may itself be a referenced file.
    files, size = reuse_weights(s.layout, s.release, s.manifest)
    s.descriptor_path = find_descriptor(s.release / "bundle")
    if s.descriptor_path is not None:
        s.descriptor = load_descriptor(s.descriptor_path)
        if s.role != "agent":  # the model server's own needs: an agent host runs none
            fail_preflight(descriptor_checks(s.manifest, s.descriptor), s.audit, s.action,
                           s.run, s.version)
    elif not s.skip_gate:
        raise HealthCheckFailed("the bundle declares no model server (models/<name>/abhed-serve.json), "
                                "so the health gate cannot run; pass --skip-gate to install without it "
                                "(recorded)")
    refs = len(s.manifest.references)
    s.audited("stage", "ok", weights_reused_files=files, weights_reused_bytes=size,
              weights_referenced_files=refs or None)
    if files:
        say(f"reused {files} unchanged model file(s) ({size / (1 << 20):.1f} MiB) by hash"
            + (f"; {refs} of them not carried by the bundle (referenced)" if refs else ""))


def _venv(s: Staging) -> None:
    build_venv(s.layout, s.release, s.manifest, s.python, say)
    s.audited("venv", "ok", python=s.python)


# The OpenSSF model signature's files, as models._signature names them (installer may not
# import models; tests/installer/test_model_signature.py keeps the two in step).
MODEL_SIGNATURE, MODEL_SIGNING_PUB = "model.sig", "model-signing.pub"
_VERIFY_TIMEOUT_S = 6 * 3600  # hashing hundreds of GiB of weights on a slow disk


def _model_signatures(s: Staging) -> None:
    """Check every model directory with the standard verifier, from the release's own venv.

    ``model_signing verify key`` (the OpenSSF command, installed with the agent)
    checks the installed files, the referenced ones linked from the store
    included, against ``model.sig`` with the ``model-signing.pub`` the signed
    manifest carries: the same check a site's own tools make, without Abhed.
    A bundle built before model signing has no ``model.sig``: recorded, not refused.
    """
    import hashlib

    from ._proc import child_env, run

    if s.role == "agent":
        s.audited("model-signature", "skipped", detail="role agent: no weights installed")
        return
    models = s.release / "bundle" / "models"
    dirs = sorted(d for d in models.iterdir() if d.is_dir()) if models.is_dir() else []
    tool = s.release / "venv" / "bin" / "model_signing"
    for d in dirs:
        sig, pub = d / MODEL_SIGNATURE, d / MODEL_SIGNING_PUB
        if not sig.is_file():
            s.audited("model-signature", "skipped", model=d.name,
                      detail="no model.sig: a bundle built before model signing")
            continue
        log = s.layout.logs / f"install-{s.version}-model-signature.log"
        done = run([str(tool), "verify", "key", "--signature", str(sig), "--public_key", str(pub),
                    str(d)], log=log, env=child_env(), timeout_s=_VERIFY_TIMEOUT_S)
        key = hashlib.sha256(pub.read_bytes()).hexdigest() if pub.is_file() else "missing"
        if done.returncode != 0:
            s.audited("model-signature", "refused", model=d.name, key_sha256=key,
                      detail=done.output[-1000:])
            raise BundleRefused(
                f"model {d.name}: its files do not match their OpenSSF model signature "
                f"(`model_signing verify key` exited {done.returncode}"
                f"{', timed out' if done.timed_out else ''}): {done.output.strip()[-600:]}. "
                f"Nothing was switched; the full output is in {log}. Get the bundle again from "
                "its publisher; if the weights were referenced from an earlier release, run "
                "`abhed-installer check` on the host")
        s.audited("model-signature", "ok", model=d.name, key_sha256=key)
        say(f"model {d.name}: OpenSSF model signature verified (key sha256 {key[:16]}…)")


def _site(s: Staging) -> None:
    s.site_sha = install_site(s.release, s.layout, s.manifest, s.signers, s.manifest_sha256)
    if s.site_sha is None:
        return
    local = _carry_local(s)
    s.audited("site", "ok", site=s.manifest.site.name, settings_sha256=s.site_sha,
              settings=str(s.release / "site/settings.json"), **local)


def _carry_local(s: Staging) -> dict[str, Any]:
    """The current release's local tightening, carried over if it still only narrows the new
    signed settings (asked of the new release's own abhed); audit fields."""
    import hashlib

    from ._errors import UsageError
    from ._local import keep, local_overlay, narrow
    from ._site_install import origin_body, write_site

    overlay = local_overlay(s.layout, s.current) if s.current is not None else None
    if overlay is None:
        return {}
    if s.drop_local:
        return {"local_dropped_from": s.current}
    signed = (s.release / "bundle/site/settings.json").read_bytes()
    try:
        effective, _ = narrow(s.release, s.layout, overlay,
                              f"this host's tightening of release {s.current}")
    except UsageError as exc:
        s.audited("site", "refused", detail=str(exc)[:4000], local_from=s.current)
        raise UsageError(f"release {s.current} was tightened on this host, and that tightening "
                         f"no longer only narrows release {s.version}'s signed settings: "
                         f"{str(exc).split(':', 1)[-1].strip()}\nNothing was switched. Upgrade "
                         "with --drop-local-settings (then tighten again if you want), or gather "
                         "a bundle whose settings it narrows") from None
    s.site_sha = hashlib.sha256(effective).hexdigest()
    overlay_sha = keep(s.layout, s.version, overlay, effective)
    write_site(s.release, s.layout, effective, origin_body(s.manifest, s.signers,
                                                           s.manifest_sha256, s.site_sha))
    say(f"site settings: this host's tightening of release {s.current} carried over "
        f"(still a narrowing of release {s.version}'s signed settings)")
    return {"local_from": s.current, "overlay_sha256": overlay_sha,
            "signed_sha256": hashlib.sha256(signed).hexdigest()}


def _run_script(s: Staging) -> None:
    """``run-model-server`` and ``check-model-host`` for the release's model; on a model
    host behind another host's router (installer._roles.replica_plan), on the address the
    router reaches it at rather than loopback."""
    if s.descriptor is None or s.role == "agent":  # an agent host serves no model
        return
    from ._descriptor import expand
    from ._roles import replica_plan
    from ._services import (
        CHECK_SCRIPT,
        DEFAULT_PORT,
        PORT_MARK,
        RUN_SCRIPT,
        render_check_script,
        render_run_script,
    )

    assert s.descriptor_path is not None
    release = s.release
    router = s.manifest.roles.router if s.manifest.roles is not None else None
    s.replica = replica_plan((router.host, router.replicas) if router else None, s.role)
    host = s.replica.address if s.replica else "127.0.0.1"
    port = s.replica.port if s.replica else DEFAULT_PORT
    shown = f"[{host}]" if ":" in host else host
    vals = {"release": str(release), "venv": str(release / "venv"),
            "python": str(release / "venv/bin/python"),
            "model_dir": str(s.descriptor_path.parent), "host": host, "port": PORT_MARK,
            "base_url": f"http://{shown}:{PORT_MARK}/v1",
            "served_name": s.descriptor.served_name,
            "workspace": str(s.layout.data), "data": str(s.layout.data)}
    argv = expand(s.descriptor.command, vals, release=release, what="the model-server command")
    script = release / RUN_SCRIPT
    script.write_text(render_run_script(s.version, argv, s.descriptor.env, s.layout, port))
    script.chmod(0o755)
    if s.descriptor.host_check is not None:  # after each start of the service: once
        check = [*expand(s.descriptor.host_check, vals, release=release, what="the host check"),
                 "--wait-s", str(int(s.descriptor.startup_timeout_s))]
        script = release / CHECK_SCRIPT
        script.write_text(render_check_script(s.version, check, s.layout, port))
    if s.replica is not None:
        say(f"model server: behind the router on {s.replica.router_host}, serving "
            f"{s.replica.url} (vLLM on {host}:{port}, open to this host and "
            f"{', '.join(s.replica.allow)} only)")
        script.chmod(0o755)


def _record(s: Staging) -> None:
    write_release_json(s.release, s.manifest, s.signers, downgrade=s.downgrade, python=s.python,
                       bundle=s.bundle, skip_gate=s.skip_gate, manifest_sha256=s.manifest_sha256,
                       role=s.role, replica=s.replica.as_json() if s.replica else None)
    record_sha, release_sha = write_record(s.release, s.manifest)
    s.audited("recorded", "ok", record_sha256=record_sha, release_sha256=release_sha)


def _units(s: Staging) -> None:
    """The role's units (installer._services.role_units): the model server and its front
    on a model host, the model relay (to the declared model endpoints) where engineers
    work; on the model host ``[roles.router]`` names, the router too, the front before it
    (installer._roles.release_router)."""
    from ._roles import release_router
    from ._services import systemd_present, write_units

    if not systemd_present():
        s.audited("units", "skipped", detail="no systemd: run script only")
        return
    plan = release_router(s.release, s.role, s.layout.current)
    s.units = write_units(s.layout, s.role, s.manifest.roles.model_endpoints,
                          *((plan.replicas, plan.catalog, plan.policy) if plan else ()),
                          replica=s.replica)
    s.audited("units", "ok", units=[str(p) for p, _ in s.units],
              router=list(plan.replicas) if plan else None,
              replica=s.replica.as_json() if s.replica else None)


def _restore_unit(s: Staging) -> None:
    for path, old in reversed(s.units):
        if old is not None:
            path.write_bytes(old)
        else:
            path.unlink(missing_ok=True)


def _health_check(s: Staging) -> None:

    if s.skip_gate:
        s.audited("gate", "skipped", detail="--skip-gate given by the operator")
    else:
        health_check_step(s.layout, s.release, s.audit, s.action, s.run, s.version,
                      accept_probe_failure=s.accept_probe_failure)


def _switch(s: Staging) -> None:
    switch_current(s.layout, s.version)
    s.audited("switch", "ok", previous=s.current)


def _links(s: Staging) -> None:
    s.link_changes = make_links(s.layout, s.links, s.site_sha is not None)
    if s.link_changes:
        s.audited("links", "ok", changed=[c.as_dict() for c in s.link_changes])


def _unlink(s: Staging) -> None:
    undo_links(s.link_changes)


def _service(s: Staging) -> None:

    post_switch(s.layout, s.audit, s.action, s.run, s.version)


def _save_state(s: Staging) -> None:
    from ._trust import pin_trust

    state = s.state
    s.old_state = state.copy()
    state.name = s.manifest.name
    state.host_link = str(s.links.site) if s.links.site else None
    state.bin_link = str(s.links.bin) if s.links.bin else None
    state.previous, state.current = s.current, s.version
    state.role = s.role
    state.highest = max(s.version, state.highest or 0)
    state.save(s.layout)
    s.trust_sha = None if s.pinned else pin_trust(s.layout, s.policy)


def _restore_state(s: Staging) -> None:
    if s.old_state is not None:
        s.old_state.save(s.layout)


def _finish(s: Staging) -> None:
    import os

    bin_dir = s.layout.bin
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "abhed"
    if not link.is_symlink():
        link.unlink(missing_ok=True)
        os.symlink("../current/venv/bin/abhed", link)
    (s.release / ".complete").write_text("")  # last: a release without it is unfinished


STEPS: tuple[Step[Staging], ...] = (
    Step("release", _make_release, _drop_release,
         undo_label=lambda s: f"removed releases/{s.version}", undo_first=True),
    Step("verify", _verify, faults=("verified",), after="verified"),
    Step("stage", _stage, faults=("staged",), after="staged"),
    Step("venv", _venv, faults=("venv", "pip")),  # both inside build_venv
    Step("model-signature", _model_signatures),
    Step("site", _site, faults=("site",), after="site"),  # inside the release: no undo
    Step("run-script", _run_script),
    Step("record", _record, faults=("recorded",), after="recorded"),
    Step("units", _units, _restore_unit,
         undo_label=lambda s: "restored the service units" if s.units else None,
         faults=("units",), after="units"),
    Step("gate", _health_check, faults=("gate",)),  # inside health_check_step
    Step("switch", _switch, lambda s: switch_current(s.layout, s.current),
         undo_label=lambda s: f"switched current back to {s.current}",
         faults=("switch",)),  # inside switch_current: between making the link and renaming it
    Step("links", _links, _unlink, faults=("links",), after="links",
         undo_label=lambda s: "restored the host and PATH links" if s.link_changes else None),
    Step("service", _service, faults=("switched",)),  # first thing in post_switch
    Step("state", _save_state, _restore_state, undo_label=lambda s: "restored state",
         undo_first=True, faults=("state",), after="state"),
    Step("finish", _finish),
)

FAULT_POINTS: tuple[str, ...] = tuple(p for step in STEPS for p in step.faults)
