"""Each model host is checked against what the site declared before it takes traffic:
the scripted server made to answer with another model, another max_model_len, another
vLLM version; installed weights whose digest differs; a host that is not there."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from models import (
    CatalogEntry,
    HostDeclaration,
    HostMismatch,
    ServeError,
    check_model_host,
    hash_weights,
    weights_digest,
)
from models.scripted import ScriptedServer

FILES = {"config.json": "a" * 64, "model.safetensors": "b" * 64}


@pytest.fixture
def host() -> Iterator[ScriptedServer]:
    with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.11.0") as srv:
        yield srv


def _declared(**kw: Any) -> HostDeclaration:
    base: dict[str, Any] = {"served_name": "site-model", "max_model_len": 4096,
                            "vllm_version": "0.11.0", "weights_digest": weights_digest(FILES)}
    return HostDeclaration(**{**base, **kw})


def test_a_host_serving_what_was_declared_passes(host: ScriptedServer) -> None:
    check_model_host(host.base_url, _declared(), installed_weights=FILES)
    check_model_host(host.base_url.removesuffix("/v1"), _declared(vllm_version=None,
                                                                   weights_digest=None))


@pytest.mark.parametrize(("field", "declared", "found"), [
    ("served_name", "other-model", "site-model"),
    ("max_model_len", 8192, "4096"),
    ("vllm_version", "0.10.2", "0.11.0"),
])
def test_a_host_answering_otherwise_is_refused_naming_the_field(
        host: ScriptedServer, field: str, declared: Any, found: str) -> None:
    with pytest.raises(HostMismatch) as info:
        check_model_host(host.base_url, _declared(**{field: declared}), installed_weights=FILES)
    err = info.value
    assert (err.field, err.declared, err.found) == (field, str(declared), found)
    assert field in str(err) and str(declared) in str(err) and found in str(err)
    assert "must not take traffic" in str(err) and err.reason == "host_mismatch"


def test_installed_weights_with_another_digest_are_refused(host: ScriptedServer) -> None:
    other = {**FILES, "model.safetensors": "c" * 64}
    with pytest.raises(HostMismatch) as info:
        check_model_host(host.base_url, _declared(), installed_weights=other)
    assert info.value.field == "weights_digest" and info.value.found == weights_digest(other)
    with pytest.raises(HostMismatch, match="weights not hashed"):
        check_model_host(host.base_url, _declared())


def test_digest_is_over_names_and_digests_in_order() -> None:
    assert weights_digest(FILES) == weights_digest(dict(reversed(FILES.items())))
    assert weights_digest(FILES) != weights_digest({"renamed.json": "a" * 64,
                                                    "model.safetensors": "b" * 64})


def test_a_host_that_is_not_there_is_named() -> None:
    with ScriptedServer() as srv:
        url = srv.base_url
    with pytest.raises(ServeError, match="did not answer") as info:
        check_model_host(url, _declared())
    assert info.value.reason == "unreachable" and not isinstance(info.value, HostMismatch)


@pytest.mark.parametrize("reply", [(200, b"not json"), (200, b"[1, 2]"), (500, b""),
                                   (200, b'{"data": "nope"}'), (200, b'{"data": [1, "x", null]}')])
def test_hostile_answers_are_refused_not_crashed_on(reply: tuple[int, bytes]) -> None:
    def get(url: str, timeout_s: float, headers: dict[str, str] | None) -> tuple[int, bytes]:
        return reply

    with pytest.raises(ServeError):
        check_model_host("http://h:1", _declared(), installed_weights=FILES, get=get)


def test_declaration_refuses_a_malformed_digest() -> None:
    with pytest.raises(ValueError, match="weights_digest"):
        HostDeclaration(served_name="m", weights_digest="ZZ")


def test_abhed_serve_check_host_names_the_field(tmp_path: Path, abhed_home: Path) -> None:
    w = tmp_path / "weights"
    w.mkdir()
    (w / "config.json").write_text("{}")
    entry = CatalogEntry(name="m", served_name="site-model", weights_dir=str(w),
                         files=hash_weights(w), max_model_len=4096, vllm_version="0.11.0")
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [entry.model_dump(mode="json")]}))
    run = [sys.executable, "-m", "cli", "serve", "--check-host"]
    with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.11.0") as good:
        proc = subprocess.run(run + [good.base_url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "serves site-model as declared" in proc.stdout
    with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.12.0") as other:
        proc = subprocess.run(run + [other.base_url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "vllm_version is '0.12.0', the site declared '0.11.0'" in proc.stderr
