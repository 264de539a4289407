"""Several model hosts: the router's unit on the model host ``[roles.router] host`` names,
the front before it checking each replica, and nothing of it elsewhere
(installer._roles.release_router, installer._services.role_units); a rollback to a
release with another router rewrites the units, and the router is restarted with the
doors (installer._steps).  Source-level, in a fake root: systemctl is never driven."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

import installer._services as services
from foundation import router_argv
from installer._audit import AuditLog
from installer._layout import Layout
from installer._roles import release_router, this_host_names
from installer._services import (
    FRONT_UNIT,
    ROUTER_UNIT,
    UNIT_NAME,
    role_units,
    write_units,
)
from installer._steps import post_switch
from models import RouterSettings, router_command

REPLICAS = ("http://10.0.0.5:8000", "http://10.0.0.6:8000")


def _exec(unit: str) -> list[str]:
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def test_both_doors_start_the_one_router_command() -> None:
    """`abhed serve --dry-run` (models) and the installer's unit print foundation's command."""
    settings = RouterSettings(replicas=REPLICAS, policy="round_robin")
    assert router_command(settings, "/py") == router_argv("/py", REPLICAS, policy="round_robin")
    unit = role_units(Layout(Path("/opt/abhed")), "model", (), REPLICAS, "/c.json", "round_robin")
    assert _exec(unit[ROUTER_UNIT]) == router_argv(
        "/opt/abhed/current/router-venv/bin/python", REPLICAS, policy="round_robin")


def test_replicas_add_the_router_and_put_the_front_before_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "opt")
    one = role_units(layout, "model", ())
    assert set(one) == {UNIT_NAME, FRONT_UNIT}
    front = _exec(one[FRONT_UNIT])
    assert front[front.index("--upstream") + 1] == "http://127.0.0.1:8000"
    catalog = str(layout.current / "bundle/models/tiny/abhed-catalog.json")
    units = role_units(layout, "model", (), REPLICAS, catalog)
    assert set(units) == {UNIT_NAME, FRONT_UNIT, ROUTER_UNIT}
    router = _exec(units[ROUTER_UNIT])
    assert router[0] == str(layout.current / "router-venv/bin/python")  # its own venv
    assert router[router.index("--host") + 1] == "127.0.0.1"  # only the front reaches it
    assert router[router.index("--worker-urls") + 1:][:2] == list(REPLICAS)
    assert f"Before={FRONT_UNIT}" in units[ROUTER_UNIT]
    front = _exec(units[FRONT_UNIT])
    assert front[front.index("--upstream") + 1] == "http://127.0.0.1:8100"
    assert front[front.index("--catalog") + 1] == catalog
    assert [front[i + 1] for i, a in enumerate(front) if a == "--replica"] == list(REPLICAS)
    assert ROUTER_UNIT not in role_units(layout, "agent", ["https://m:8443/v1"], REPLICAS)


def _release(layout: Layout, version: int, role: str, router: dict[str, object] | None) -> Path:
    release = layout.release(version)
    (release / "bundle/models/tiny").mkdir(parents=True)
    (release / "bundle/models/tiny/abhed-serve.json").write_text("{}")
    roles: dict[str, object] = {"hosts": ["agent", "model"],
                                "model_endpoints": ["https://model-1:8443/v1"]}
    if router is not None:
        roles["router"] = router
    (release / "release.json").write_text(json.dumps({"role": role,
                                                      "manifest": {"roles": roles}}))
    return release


ROUTER = {"host": "model-1", "replicas": list(REPLICAS), "policy": "power_of_two"}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake root with systemd, whose host is named model-1."""
    sysroot = tmp_path / "root"
    (sysroot / "run/systemd/system").mkdir(parents=True)
    (sysroot / "etc").mkdir()
    (sysroot / "etc/hostname").write_text("Model-1.site.example\n")
    monkeypatch.setenv("ABHED_INSTALLER_SYSROOT", str(sysroot))
    return sysroot


def test_only_the_named_model_host_runs_the_router(root: Path, tmp_path: Path) -> None:
    layout = Layout(tmp_path / "opt")
    assert {"model-1", "model-1.site.example"} <= this_host_names()
    release = _release(layout, 1, "model", ROUTER)
    plan = release_router(release, "model", layout.current)
    assert plan is not None and plan.replicas == REPLICAS and plan.policy == "power_of_two"
    assert plan.catalog == str(layout.current / "bundle/models/tiny/abhed-catalog.json")
    written = write_units(layout, "model", (), plan.replicas, plan.catalog, plan.policy)
    assert {p.name for p, _ in written} == {UNIT_NAME, FRONT_UNIT, ROUTER_UNIT}
    router = _exec((root / "etc/systemd/system" / ROUTER_UNIT).read_text())
    assert router[router.index("--policy") + 1] == "power_of_two"
    # Another model host, an agent host, a release with no router: none.
    (root / "etc/hostname").write_text("model-2\n")
    assert release_router(release, "model", layout.current) is None
    (root / "etc/hostname").write_text("model-1\n")
    assert release_router(release, "agent", layout.current) is None
    assert release_router(_release(layout, 2, "model", None), "model", layout.current) is None
    # Writing the units without the router removes the one left (kept for undo).
    again = write_units(layout, "model", ())
    assert not (root / "etc/systemd/system" / ROUTER_UNIT).exists()
    assert dict((p.name, old) for p, old in again)[ROUTER_UNIT] is not None


def test_a_rollback_rewrites_the_units_and_restarts_the_router_first(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Release 2 declared no router; rolling back to release 1 (which did) on model-1 writes
    the router's unit and points the front at it, recorded, and the running router is
    restarted before the front (whose start checks the hosts behind it)."""
    layout = Layout(tmp_path / "opt")
    _release(layout, 1, "model", ROUTER)
    _release(layout, 2, "model", None)
    write_units(layout, "model", ())
    calls: list[tuple[str, ...]] = []

    def fake(*args: str) -> str | None:
        calls.append(args)
        return "inactive" if args[:2] == ("is-active", UNIT_NAME) else "active"

    monkeypatch.setattr(services, "systemctl", fake)
    audit = AuditLog(tmp_path / "audit")
    post_switch(layout, audit, "rollback", "r1", 1)
    units = root / "etc/systemd/system"
    front = _exec((units / FRONT_UNIT).read_text())
    assert front[front.index("--upstream") + 1] == "http://127.0.0.1:8100"
    assert (units / ROUTER_UNIT).is_file()
    assert [c[1] for c in calls if c[0] == "try-restart"] == [ROUTER_UNIT, FRONT_UNIT]
    rewritten = [e for _, e in audit.entries() if e["step"] == "units"]
    assert [sorted(e["rewritten"]) for e in rewritten] == [[FRONT_UNIT, ROUTER_UNIT]]
    # And forward again to release 2: the router is stopped and its unit removed.
    calls.clear()
    post_switch(layout, audit, "upgrade", "r2", 2)
    assert not (units / ROUTER_UNIT).exists()
    assert ("disable", "--now", ROUTER_UNIT) in calls
    front = _exec((units / FRONT_UNIT).read_text())
    assert front[front.index("--upstream") + 1] == "http://127.0.0.1:8000"


def test_an_upgrade_that_changes_only_the_router_is_not_nothing_to_do_on_a_model_host(
        tmp_path: Path) -> None:
    """Same files, another [roles.router]: a model host's units change (its router, its
    front), so the upgrade runs there; an agent host has nothing to do."""
    from bundle import Manifest
    from installer._roles import same_for_role

    sha = "0" * 64

    def manifest(router: dict[str, object] | None) -> Manifest:
        roles: dict[str, object] = {"hosts": ["agent", "model"],
                                    "model_endpoints": ["https://model-1:8443/v1"]}
        if router is not None:
            roles["router"] = router
        return Manifest.model_validate_json(json.dumps({
            "format": "abhed-bundle/1", "name": "site", "version": 1,
            "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.36", "python": "3.11",
                         "accelerator": "cpu"},
            "members": [{"name": "sbom.cdx.json", "size": 1, "sha256": sha,
                         "compression": "none", "content_size": 1, "content_sha256": sha}],
            "components": [], "sbom": "sbom.cdx.json",
            "provenance": {"builder": "t", "spec_sha256": sha, "inputs": []},
            "roles": roles}))

    current = tmp_path / "releases/1"
    current.mkdir(parents=True)
    (current / "release.json").write_text(json.dumps(
        {"manifest": manifest(ROUTER).model_dump(mode="json")}))
    assert same_for_role(manifest(ROUTER), current, "model")
    moved = {**ROUTER, "replicas": [REPLICAS[0], "http://10.0.0.7:8000"]}
    assert not same_for_role(manifest(moved), current, "model")
    assert not same_for_role(manifest(None), current, "model")
    assert same_for_role(manifest(moved), current, "agent")
