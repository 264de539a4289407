"""A model host behind another host's router (installer._roles.replica_plan): it finds its
part in the site's ``[roles.router]`` by the addresses it owns, serves vLLM there, opens
the unit to the router's host only, and runs no front of its own.

The plan is decided in a network namespace of its own (the site address on its
loopback device, /etc/hosts naming both hosts), as on a real model host: only the kernel
knows which addresses are this host's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from installer._layout import Layout
from installer._roles import ReplicaPlan, release_replica
from installer._services import FRONT_UNIT, ROUTER_UNIT, UNIT_NAME, role_units
from tests.helpers import ROOT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="network namespaces")

# Run inside the namespace: each case's plan (or the refusal) as one JSON line.
PLANS = r"""
import json, sys
from installer._errors import UsageError
from installer._roles import replica_plan
for router, role in json.loads(sys.argv[1]):
    try:
        plan = replica_plan((router[0], tuple(router[1])) if router else None, role)
        print(json.dumps(plan.as_json() if plan else None))
    except UsageError as exc:
        print(json.dumps({"refused": str(exc)}))
"""


def _plans(tmp_path: Path, hostname: str, cases: list[tuple[object, str]]) -> list[object]:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc/hostname").write_text(hostname + "\n")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n10.77.0.1 model-1\n10.77.0.2 model-2\n")
    script = ("set -e; ip link set lo up; ip addr add 10.77.0.2/32 dev lo; "
              f"mount --bind {hosts} /etc/hosts; "
              'exec "$@"')
    done = subprocess.run(
        ["unshare", "--net", "--mount", "--propagation", "private", "--", "sh", "-c", script,
         "sh", sys.executable, "-c", PLANS, json.dumps(cases)],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(ROOT),
             "ABHED_INSTALLER_SYSROOT": str(root)})
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_model_host_finds_its_part_behind_the_router_by_its_own_addresses(
        tmp_path: Path) -> None:
    two = ["model-1", ["http://127.0.0.1:8000", "http://10.77.0.2:8001"]]
    by_name = ["model-1", ["http://127.0.0.1:8000", "http://model-2:8000"]]
    elsewhere = ["model-1", ["http://127.0.0.1:8000", "http://10.77.0.9:8000"]]
    unknown_router = ["model-x", ["http://127.0.0.1:8000", "http://10.77.0.2:8000"]]
    tls = ["model-1", ["http://127.0.0.1:8000", "https://10.77.0.2:8443"]]
    got = _plans(tmp_path, "model-2", [(two, "model"), (by_name, "all"), (two, "agent"),
                                       (None, "model"), (elsewhere, "model"),
                                       (unknown_router, "model"), (tls, "model")])
    assert got[0] == {"url": "http://10.77.0.2:8001", "address": "10.77.0.2", "port": 8001,
                      "router_host": "model-1", "allow": ["10.77.0.1"]}
    assert got[1] == {"url": "http://model-2:8000", "address": "10.77.0.2", "port": 8000,
                      "router_host": "model-1", "allow": ["10.77.0.1"]}
    assert got[2] is None and got[3] is None  # an agent host; a site with no router
    assert got[4] is None  # no replica is this host: its vLLM stays on loopback
    refused = got[5]
    assert isinstance(refused, dict)
    assert "model-x does not resolve here" in refused["refused"]
    assert "Nothing was installed" in refused["refused"] and "/etc/hosts" in refused["refused"]
    plain = got[6]  # vLLM serves plain HTTP: an https replica here could never answer
    assert isinstance(plain, dict) and "Declare the replica as http://10.77.0.2:8443" in \
        plain["refused"]
    # The router's own host serves its vLLM on loopback (the replica 127.0.0.1 is its).
    assert _plans(tmp_path, "model-1", [(two, "model")]) == [None]


PLAN = ReplicaPlan("http://10.77.0.2:8001", "10.77.0.2", 8001, "model-1", ("10.77.0.1",))


def test_a_replicas_units_open_vllm_to_the_router_only_and_run_no_front(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "opt")
    units = role_units(layout, "model", (), replica=PLAN)
    assert set(units) == {UNIT_NAME}  # engineers reach the front on the router's host
    allow = [ln for ln in units[UNIT_NAME].splitlines() if ln.startswith("IPAddress")]
    assert allow == ["IPAddressDeny=any", "IPAddressAllow=localhost 10.77.0.2 10.77.0.1"]
    alone = role_units(layout, "model", ())
    assert set(alone) == {UNIT_NAME, FRONT_UNIT} and ROUTER_UNIT not in alone
    assert "IPAddressAllow=localhost\n" in alone[UNIT_NAME]


def test_the_plan_decided_at_install_is_what_a_rollback_reads(tmp_path: Path) -> None:
    release = tmp_path / "releases/3"
    release.mkdir(parents=True)
    (release / "release.json").write_text(json.dumps({"role": "model",
                                                      "replica": PLAN.as_json()}))
    assert release_replica(release) == PLAN
    bodies: list[object] = [{"role": "model"}, {"replica": {"url": "x"}}, {"replica": "x"}, []]
    for body in bodies:
        (release / "release.json").write_text(json.dumps(body))
        assert release_replica(release) is None
    (release / "release.json").write_text("{broken")
    assert release_replica(release) is None


def test_status_says_what_the_host_serves_behind_the_router(tmp_path: Path) -> None:
    """`abhed-installer status` on a replica: its part and its vLLM's health where it listens."""
    from installer._verbs.status import _service, serving_part

    layout = Layout(tmp_path / "opt")
    release = layout.release(2)
    release.mkdir(parents=True)
    (release / "release.json").write_text(json.dumps({"role": "model",
                                                      "replica": PLAN.as_json()}))
    part, data = serving_part(layout, 2, "model")
    assert part == " (behind the router on model-1, serving http://10.77.0.2:8001)"
    assert data == {"replica": PLAN.as_json()}
    assert serving_part(layout, 2, "agent") == ("", {})
    assert serving_part(layout, None, "model") == ("", {})
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    here = ReplicaPlan(f"http://127.0.0.1:{port}", "127.0.0.1", port, "model-1", ())
    svc = _service(here)  # asked where the replica listens; nothing there: said, not raised
    assert (svc["host"], svc["port"], svc["health"]) == ("127.0.0.1", port, "not answering")
