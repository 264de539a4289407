"""Several GPUs and model hosts on vLLM's own engines: the commands generated for each
layout (tensor, pipeline, data parallel, Ray, the vLLM router), the fit rule that refuses
a layout the declared GPUs cannot hold, and the one-balancer rule on the client side.

Tensor/pipeline parallel and Ray need GPUs and several hosts, which this machine lacks:
they are checked through the commands (what vLLM would be asked to do), and run on a GPU
machine when one is lent.  The router's flags are those of vllm_router's own
router_args.py (vllm-router 0.1.17)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from models import (
    CatalogEntry,
    ProviderConfig,
    RouterSettings,
    ServeSettings,
    VllmServer,
    check_parallel_fit,
    hash_weights,
    router_command,
)


def _entry(tmp_path: Path, **kw: Any) -> CatalogEntry:
    w = tmp_path / "weights"
    w.mkdir(exist_ok=True)
    (w / "config.json").write_text("{}")
    return CatalogEntry(name="m", served_name="served-m", weights_dir=str(w), files=hash_weights(w),
                        max_model_len=4096, **kw)


def _flags(argv: list[str]) -> dict[str, str]:
    """--flag value pairs of a command line (a bare flag maps to '')."""
    out: dict[str, str] = {}
    for i, a in enumerate(argv):
        if a.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[a] = "" if nxt.startswith("--") else nxt
    return out


@pytest.mark.parametrize(("layout", "want", "absent"), [
    ({"tensor_parallel_size": 4, "gpus_per_host": 4},
     {"--tensor-parallel-size": "4"},
     ("--pipeline-parallel-size", "--data-parallel-size", "--distributed-executor-backend")),
    ({"pipeline_parallel_size": 2, "gpus_per_host": 2},
     {"--tensor-parallel-size": "1", "--pipeline-parallel-size": "2"},
     ("--data-parallel-size",)),
    ({"data_parallel_size": 4, "gpus_per_host": 8},
     {"--tensor-parallel-size": "1", "--data-parallel-size": "4"},
     ("--pipeline-parallel-size", "--distributed-executor-backend")),
    ({"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "distributed_executor_backend": "ray",
      "gpus_per_host": 8, "hosts": 2},
     {"--tensor-parallel-size": "8", "--pipeline-parallel-size": "2",
      "--distributed-executor-backend": "ray"},
     ("--data-parallel-size",)),
])
def test_vllm_command_for_each_layout(tmp_path: Path, layout: dict[str, Any],
                                      want: dict[str, str], absent: tuple[str, ...]) -> None:
    cmd = VllmServer(_entry(tmp_path, **layout), log_path=tmp_path / "log", python="/opt/py",
                     port=9001).command()
    flags = _flags(cmd)
    for flag, value in want.items():
        assert flags[flag] == value, flag
    for flag in absent:
        assert flag not in flags


def test_router_command_over_the_replicas() -> None:
    r = RouterSettings(replicas=("http://10.0.0.5:8000", "http://10.0.0.6:8000/v1/"),
                       policy="power_of_two", port=8100)
    cmd = router_command(r, "/opt/router/bin/python")
    assert cmd[:3] == ["/opt/router/bin/python", "-m", "vllm_router.launch_router"]
    i = cmd.index("--worker-urls")
    assert cmd[i + 1:i + 3] == ["http://10.0.0.5:8000", "http://10.0.0.6:8000"]  # roots, no /v1
    flags = _flags(cmd)
    assert flags["--policy"] == "power_of_two" and flags["--port"] == "8100"
    assert flags["--health-check-endpoint"] == "/health" and flags["--host"] == "127.0.0.1"
    assert r.base_url == "http://127.0.0.1:8100/v1"


@pytest.mark.parametrize(("replicas", "match"), [
    ((), "at least 1"),
    (("ftp://h:1",), "http:// or https://"),
    (("http://h:1/other",), "no path"),
    (("http://u:p@h:1",), "credentials"),
    (("http://h:1", "http://h:1/v1"), "listed twice"),
    (tuple(f"http://h:{p}" for p in range(1, 70)), "at most 64"),
])
def test_router_refuses_bad_replicas(replicas: tuple[str, ...], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        RouterSettings(replicas=replicas)


def test_router_refuses_an_unknown_policy() -> None:
    with pytest.raises(ValidationError, match="policy"):
        RouterSettings.model_validate({"replicas": ["http://h:1"], "policy": "home_made"})


@pytest.mark.parametrize(("layout", "match"), [
    ({"tensor_parallel_size": 4, "gpus_per_host": 2}, "tensor_parallel_size 4 is more than gpus_per_host 2"),
    ({"tensor_parallel_size": 2, "data_parallel_size": 2, "gpus_per_host": 2},
     r"tensor_parallel_size 2 x pipeline_parallel_size 1 x data_parallel_size 2 = 4 GPUs, but "
     r"gpus_per_host 2 x hosts 1 = 2"),
    ({"pipeline_parallel_size": 2, "hosts": 2, "gpus_per_host": 1}, "needs distributed_executor_backend"),
    ({"pipeline_parallel_size": 4, "hosts": 2, "gpus_per_host": 1,
      "distributed_executor_backend": "ray"}, "= 4 GPUs, but gpus_per_host 1 x hosts 2 = 2"),
])
def test_layouts_that_do_not_fit_are_refused_naming_the_fields(
        tmp_path: Path, layout: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        _entry(tmp_path, **layout)


def test_fit_rule_accepts_what_fits() -> None:
    check_parallel_fit(tensor=8, pipeline=2, data=1, gpus_per_host=8, hosts=2, backend="ray")
    check_parallel_fit(tensor=64, pipeline=64, data=64, gpus_per_host=None, hosts=1, backend=None)


def test_client_rotation_is_refused_behind_a_router() -> None:
    one = {"name": "site", "api": "openai", "router": True}
    assert ProviderConfig.model_validate({**one, "base_url": "https://models.site/v1"}).router
    with pytest.raises(ValidationError, match="one mechanism balances, and it is the router"):
        ProviderConfig.model_validate({**one, "base_url": ["http://a:1/v1", "http://b:1/v1"]})


def test_serve_dry_run_prints_vllm_and_router_commands_shell_quoted(
        tmp_path: Path, abhed_home: Path) -> None:
    e = _entry(tmp_path, data_parallel_size=2, gpus_per_host=2)
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [e.model_dump(mode="json")]}))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"serve": {"router": {
        "replicas": ["http://10.0.0.5:8000", "http://10.0.0.6:8000"], "policy": "round_robin",
        "python": "/opt/router env/bin/python"}}}))
    proc = subprocess.run([sys.executable, "-m", "cli", "serve", "--dry-run", "--config", str(config),
                           "--python", sys.executable, "--port", "18777"],
                          check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    vllm, router = proc.stdout.strip().splitlines()
    assert _flags(shlex.split(vllm))["--data-parallel-size"] == "2"
    argv = shlex.split(router)
    assert argv[0] == "/opt/router env/bin/python"  # quoted: the space survives
    assert _flags(argv)["--policy"] == "round_robin"


def test_serve_settings_without_router_print_one_command(tmp_path: Path) -> None:
    srv = VllmServer(_entry(tmp_path), log_path=tmp_path / "log", python="/opt/py",
                     settings=ServeSettings())
    assert srv.router_command() is None
