"""The health gate's host check: the release's own ``abhed serve --check-host`` against the
gate's model server, before its first prompt.  The real CLI and the real check
(models._host_check) against the scripted server made to answer as another vLLM, and
over altered weights.  Gather declares the step in every bundle's
abhed-serve.json (tests/bundle/test_gather.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from installer._errors import HealthCheckFailed
from installer._health import _host_check
from installer._layout import Layout
from models import CatalogEntry, hash_weights
from models.scripted import ScriptedServer


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    w = tmp_path / "model"
    w.mkdir()
    (w / "config.json").write_text("{}")
    entry = CatalogEntry(name="tiny", served_name="site-model", weights_dir=".",
                         files=hash_weights(w), max_model_len=4096, vllm_version="0.11.0")
    path = w / "abhed-catalog.json"
    path.write_text(json.dumps({"models": [entry.model_dump(mode="json")]}))
    return path


def _argv(catalog: Path, base_url: str) -> list[str]:
    # What gather declares, with this venv's abhed for {venv}/bin/abhed.
    return [str(Path(sys.executable).with_name("abhed")), "serve", "--catalog", str(catalog),
            "--model", "tiny", "--check-host", base_url]


def test_a_server_as_declared_passes_and_one_answering_otherwise_fails_the_gate(
        tmp_path: Path, catalog: Path) -> None:
    layout = Layout(tmp_path / "prefix")
    env = {**os.environ, "ABHED_HOME": str(tmp_path / "home")}
    with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.11.0") as good:
        said = _host_check(_argv(catalog, good.base_url), env, layout, tmp_path, 120.0)
    assert "serves site-model as declared" in said
    # Each field's refusal is models' own test (tests/models/test_host_check.py); here, that
    # one reaches the gate's words.
    with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.12.0") as other:
        with pytest.raises(HealthCheckFailed) as info:
            _host_check(_argv(catalog, other.base_url), env, layout, tmp_path, 120.0)
    said = str(info.value)
    assert "does not serve what the site declared" in said and "Nothing was switched" in said
    assert "vllm_version is '0.12.0', the site declared '0.11.0'" in said, said


def test_altered_weights_fail_the_gate(tmp_path: Path, catalog: Path) -> None:
    (catalog.parent / "config.json").write_text('{"changed": true}')
    env = {**os.environ, "ABHED_HOME": str(tmp_path / "home")}
    with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.11.0") as srv:
        with pytest.raises(HealthCheckFailed, match="config.json"):
            _host_check(_argv(catalog, srv.base_url), env, Layout(tmp_path / "p"), tmp_path, 120.0)


def test_the_model_service_checks_its_host_once_per_start(tmp_path: Path, catalog: Path) -> None:
    """``check-model-host`` (abhed-model.service's ExecStartPost): waits for its vLLM to
    answer (here the scripted server, started after the script, behind the host's vLLM key:
    the key reaches the check from the key file, never argv), checks it once, records the
    outcome; a host answering otherwise fails the start, named."""
    import socket
    import subprocess

    from installer._services import (
        CHECK_SCRIPT,
        PORT_MARK,
        render_check_script,
        unit_text,
        vllm_key_path,
    )

    layout = Layout(tmp_path / "prefix")
    layout.logs.mkdir(parents=True)
    key = vllm_key_path(layout)
    key.parent.mkdir(parents=True)
    key.write_text("k3y")
    script = tmp_path / CHECK_SCRIPT
    script.write_text(render_check_script(
        3, [*_argv(catalog, f"http://127.0.0.1:{PORT_MARK}/v1"), "--wait-s", "60"], layout))
    assert f"ExecStartPost=/bin/sh -c 'if [ -x {layout.current}/{CHECK_SCRIPT} ]" \
        in unit_text(layout)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ABHED_HOME": str(tmp_path / "home"), "ABHED_MODEL_PORT": str(port)}
    env.pop("VLLM_API_KEY", None)
    proc = subprocess.Popen(["sh", str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:  # vLLM comes up after the check started waiting for it
        with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.11.0",
                            port=port, api_key="k3y"):
            out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "serves site-model as declared" in out
    with ScriptedServer(model="site-model", max_model_len=8192, vllm_version="0.11.0",
                        port=port, api_key="k3y"):
        done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
    assert done.returncode == 1 and "max_model_len is 8192" in done.stdout, done.stdout
    record = (layout.logs / "host-check.log").read_text().splitlines()
    assert [line.split()[1] for line in record] == ["ok", "refused"]
    assert "max_model_len is 8192" in record[1]


def test_the_router_hosts_gate_checks_every_host_behind_it(
        tmp_path: Path, catalog: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """installer._replicas: each replica asked by the release's own abhed serve --check-host
    before the switch: one answering otherwise is refused naming it and the field, one not
    answering is noted (the router routes around it), none answering is refused; this
    host's own (loopback) vLLM is the gate's own check, not asked again."""
    import installer._replicas as replicas
    from installer._roles import RouterPlan

    layout = Layout(tmp_path / "prefix")
    release = layout.release(1)
    (release / "venv/bin").mkdir(parents=True)
    (release / "venv/bin/abhed").symlink_to(Path(sys.executable).with_name("abhed"))
    dead = "http://127.0.0.1:9"  # discard: nothing listens
    own = RouterPlan((dead,), "round_robin", str(catalog))
    assert "0 of 0 other model hosts" in replicas.check_replicas(release, layout, own)
    monkeypatch.setattr(replicas, "_LOOPBACK", ())  # the scripted hosts stand for others
    with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.11.0") as good, \
            ScriptedServer(model="site-model", max_model_len=4096,
                           vllm_version="0.12.0") as other:
        roots = [s.base_url.removesuffix("/v1") for s in (good, other)]
        said = replicas.check_replicas(
            release, layout, RouterPlan((roots[0], dead), "round_robin", str(catalog)))
        assert said == ("1 of 2 other model hosts serve as declared; not answering (the "
                        f"router routes around them): {dead}")
        with pytest.raises(HealthCheckFailed) as info:
            replicas.check_replicas(release, layout,  # refused at the first: one run
                                    RouterPlan((roots[1], roots[0]), "round_robin", str(catalog)))
    assert f"model host {roots[1]} behind the router" in str(info.value)
    assert "vllm_version is '0.12.0'" in str(info.value) and "Nothing was switched" in str(info.value)
    with pytest.raises(HealthCheckFailed, match="no model host behind the router answers"):
        replicas.check_replicas(release, layout, RouterPlan((dead,), "round_robin", str(catalog)))
