"""The steps install, upgrade and rollback share: a failed preflight, the health gate, the
service after the switch.

Their own module so that staging (``installer._stage``), the pipeline that runs it
(``installer._deploy``) and ``rollback`` all import them from below: staging imported
them from ``_deploy``, inside functions, which made the two a runtime import cycle.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ._audit import AuditLog
from ._errors import HealthCheckFailed, PreflightFailed, StepFailed
from ._faults import fault_point
from ._layout import Layout, atomic_write
from ._ui import say

__all__ = ["fail_preflight", "health_check_step", "post_switch", "restart_doors",
           "rewrite_units"]


def fail_preflight(checks: list, audit: AuditLog, action: str, run: str,  # type: ignore[type-arg]
                    version: int) -> None:
    bad = [c for c in checks if c.status == "fail"]
    if not bad:
        return
    audit.append(action, "preflight", "failed", run=run, version=version,
                 failed=[c.as_dict() for c in bad])
    lines = [f"  {c.name}: found {c.found}; needs {c.needed}; do: {c.fix}" for c in bad]
    raise PreflightFailed("preflight failed, nothing was written:\n" + "\n".join(lines))


def health_check_step(layout: Layout, release: Path, audit: AuditLog, action: str, run: str,
                      version: int, accept_probe_failure: str | None = None) -> None:
    """The health gate, recorded; for a release with site settings, in private namespaces
    where it is current (``installer._isolate``), its model server on the service's port.
    On an agent host (``installer._roles``) there is no model server: the gate's agent asks
    the site's model endpoints, the only addresses its network reaches."""
    from ._gate_relay import gate_relay
    from ._health import HealthStep, run_agent_check, run_health_check
    from ._isolate import isolated
    from ._roles import release_role
    from ._services import DEFAULT_PORT
    from ._site_install import release_has_site

    say(f"health gate for release {version}")
    own = release_has_site(release)
    role, endpoints = release_role(release)
    current = layout.current_version()  # read here: inside the isolated gate it is `release`

    def check() -> list[HealthStep]:
        if role == "agent":
            # The engineers' path: through the release's own relay when the settings use
            # one (installer._gate_relay), recorded on the model side as the gate.
            with gate_relay(release, layout, endpoints) as sock:
                if sock is not None:
                    say(f"  gate: through the release's model relay on {sock}, recorded as "
                        "the gate")
                return run_agent_check(release, layout, endpoints, relay=sock,
                                       on_step=lambda m: say(f"  gate: {m}"))
        return run_health_check(release, layout, on_step=lambda m: say(f"  gate: {m}"),
                                current=current, accept_probe_failure=accept_probe_failure,
                                port=DEFAULT_PORT if own else None)

    t0 = time.monotonic()
    try:
        fault_point("gate")
        if role == "agent":
            say(f"  gate: in private mount and network namespaces where release {version} is "
                f"current; the network reaches the site's model endpoints only "
                f"({', '.join(endpoints)})")
            steps = isolated(layout, version, check, endpoints=endpoints)
        elif own:
            say(f"  gate: in private mount and network namespaces where release {version} is "
                "current, as engineers will get it")
            steps = isolated(layout, version, check)
        else:
            steps = check()
        steps += _replicas_step(layout, release, role, lambda m: say(f"  gate: {m}"))
    except HealthCheckFailed as exc:
        audit.append(action, "gate", "failed", run=run, version=version, detail=str(exc))
        raise
    except StepFailed as exc:
        audit.append(action, "gate", "failed", run=run, version=version, detail=str(exc))
        raise HealthCheckFailed(str(exc)) from None
    for s in steps:
        if s.audit is not None:
            audit.append(action, "probe", str(s.audit.get("result", "ok")), run=run, version=version,
                         **{k: v for k, v in s.audit.items() if k != "result"})
    audit.append(action, "gate", "ok", run=run, version=version,
                 seconds=round(time.monotonic() - t0, 2), isolated=own or role == "agent" or None,
                 role=role, model_endpoints=list(endpoints) or None,
                 steps=[{"name": s.name, "seconds": round(s.seconds, 2), "detail": s.detail}
                        for s in steps])


def _replicas_step(layout: Layout, release: Path, role: str, on_step: Any) -> list[Any]:
    """On the model host ``[roles.router]`` names: every replica behind the router checked
    before the switch (installer._replicas); elsewhere nothing.  Outside the gate's
    namespaces: the replicas are other hosts on the model network."""
    from ._health import HealthStep
    from ._replicas import check_replicas
    from ._roles import release_router

    plan = release_router(release, role, release)
    if plan is None:
        return []
    t = time.monotonic()
    detail = check_replicas(release, layout, plan)
    on_step(f"replicas: {detail}")
    return [HealthStep("replicas", time.monotonic() - t, detail)]


def restart_doors(layout: Layout, role: str, audit: AuditLog, action: str, run: str,
                  version: int) -> None:
    """The model relay, front and router that are running are restarted, so they run the
    release now current (their units start ``PREFIX/bin/abhed`` and
    ``PREFIX/current/router-venv``, which follow ``current``); one that is not running is
    left so (``try-restart``): the operator starts it once the host holds its credential
    (docs/model-service.md).  The router first: the front checks the hosts behind it
    when it starts."""
    from ._services import FRONT_UNIT, RELAY_UNIT, ROUTER_UNIT, systemctl

    for unit in (ROUTER_UNIT, RELAY_UNIT, FRONT_UNIT):
        if unit not in _units_of(layout, version, role):
            continue
        said = systemctl("try-restart", unit)
        if said is None:
            return
        state = systemctl("is-active", unit) or "unknown"
        audit.append(action, "restart", "ok" if state in ("active", "inactive") else "failed",
                     run=run, version=version, unit=unit, state=state)


def _units_of(layout: Layout, version: int, role: str) -> dict[str, str]:
    """The units release ``version`` runs on this host (its role's, its router's)."""
    from ._roles import release_replica, release_role, release_router
    from ._services import role_units

    release = layout.release(version)
    plan = release_router(release, role, layout.current)
    endpoints = release_role(release)[1]
    return role_units(layout, role, endpoints,
                      *((plan.replicas, plan.catalog, plan.policy) if plan else ()),
                      replica=release_replica(release))


def rewrite_units(layout: Layout, role: str, audit: AuditLog, action: str, run: str,
                  version: int) -> None:
    """The units as release ``version`` declares them, written where they differ (a
    rollback to a release with another router, or none); recorded.  Staging already wrote
    them for an install or upgrade, so there this changes nothing."""
    from ._services import stale_units, systemctl, systemd_present, unit_path

    if not systemd_present():
        return
    wanted = _units_of(layout, version, role)
    changed: list[str] = []
    where = unit_path().parent
    for name, text in wanted.items():
        path = where / name
        try:
            same = path.read_text("utf-8") == text
        except OSError:
            same = False
        if not same:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text.encode())
            changed.append(name)
    for name in stale_units(wanted):  # nothing of this release points at it
        systemctl("disable", "--now", name)
        (where / name).unlink()
        changed.append(name)
    if changed:
        audit.append(action, "units", "ok", run=run, version=version, rewritten=changed)


def post_switch(layout: Layout, audit: AuditLog, action: str, run: str, version: int) -> None:
    """With systemd: restart the service on the new release and wait for its health, then
    restart the role's router, relay and front that are running (:func:`restart_doors`):
    after the model server, because the front checks the hosts behind it, this one
    included, when it starts."""
    from ._health import loopback_get
    from ._roles import release_replica, release_role
    from ._services import DEFAULT_PORT, UNIT_NAME, systemctl

    fault_point("switched")
    role = release_role(layout.release(version))[0]
    rewrite_units(layout, role, audit, action, run, version)
    if systemctl("daemon-reload") is None:
        return
    if role == "agent":  # an agent host runs no model service
        restart_doors(layout, role, audit, action, run, version)
        return
    active = systemctl("is-active", UNIT_NAME)
    if active != "active":
        audit.append(action, "service", "skipped", run=run, version=version,
                     detail=f"{UNIT_NAME} is {active}; start it with systemctl enable --now "
                     f"{UNIT_NAME}")
        restart_doors(layout, role, audit, action, run, version)
        return
    systemctl("restart", UNIT_NAME)
    replica = release_replica(layout.release(version))  # its vLLM is on its site address
    health = (f"{replica.url}/health" if replica is not None
              else f"http://127.0.0.1:{DEFAULT_PORT}/health")
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        try:
            if loopback_get(health, 2.0)[0] == 200:
                audit.append(action, "service", "ok", run=run, version=version)
                restart_doors(layout, role, audit, action, run, version)
                return
        except OSError:
            pass
        time.sleep(1)
    raise HealthCheckFailed(f"{UNIT_NAME} did not become healthy on release {version} after the "
                            "switch; switched back")
