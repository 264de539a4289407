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
from models import CatalogEntry, ScriptedServer, hash_weights


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
