"""Several model hosts: the router's unit on the model host that runs the front, and the
front before it, checking each replica (installer._services.role_units)."""

from __future__ import annotations

import shlex
from pathlib import Path

from installer._layout import Layout
from installer._services import (
    FRONT_UNIT,
    ROUTER_UNIT,
    UNIT_NAME,
    role_units,
    router_argv,
)
from models import RouterSettings, router_command

REPLICAS = ("http://10.0.0.5:8000", "http://10.0.0.6:8000")


def _exec(unit: str) -> list[str]:
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def test_the_installers_router_command_is_models_own() -> None:
    settings = RouterSettings(replicas=REPLICAS, policy="round_robin")
    assert router_argv("/py", REPLICAS, policy="round_robin") == router_command(settings, "/py")


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
    assert router[0] == str(layout.current / "venv/bin/python")
    assert router[router.index("--host") + 1] == "127.0.0.1"  # only the front reaches it
    assert router[router.index("--worker-urls") + 1:][:2] == list(REPLICAS)
    front = _exec(units[FRONT_UNIT])
    assert front[front.index("--upstream") + 1] == "http://127.0.0.1:8100"
    assert front[front.index("--catalog") + 1] == catalog
    assert [front[i + 1] for i, a in enumerate(front) if a == "--replica"] == list(REPLICAS)
    assert ROUTER_UNIT not in role_units(layout, "agent", ["https://m:8443/v1"], REPLICAS)
