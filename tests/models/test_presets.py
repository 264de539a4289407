"""Model-family presets and ``abhed catalog add``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from models import (
    PRESETS,
    TOOL_CALL_PARSERS,
    ProviderConfigError,
    VllmServer,
    entry_from_preset,
    get_preset,
    load_catalog,
    suggest_tensor_parallel,
)
from models._catalog import REASONING_PARSERS

ROOT = Path(__file__).resolve().parents[2]


def _model(tmp_path: Path, template: bool = False) -> Path:
    d = tmp_path / "Qwen3-Coder-30B-A3B-Instruct"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "qwen3_moe"}')
    (d / "model-00001-of-00002.safetensors").write_bytes(b"\x00" * 1000)
    (d / "sub").mkdir()
    (d / "sub" / "tokenizer.json").write_text("{}")
    if template:
        (d / "chat_template.jinja").write_text("{{ messages }}")
    return d


def test_the_table_has_every_family_the_issue_names_with_valid_parsers() -> None:
    want = {"qwen3-coder": "qwen3_coder", "qwen2.5-coder": "hermes", "devstral": "mistral",
            "gpt-oss": "openai", "glm-4.5": "glm45", "tiny-test": "hermes", "smollm2": "hermes"}
    got = {p.family: p.tool_call_parser for p in PRESETS}
    assert got == want
    for p in PRESETS:
        assert p.tool_call_parser in TOOL_CALL_PARSERS
        assert p.reasoning_parser is None or p.reasoning_parser in REASONING_PARSERS
        assert p.default_context <= p.max_context and p.sources
        assert list(p.tp_by_gpu_gib) == sorted(p.tp_by_gpu_gib)
    docs = (ROOT / "docs/models.md").read_text()
    for p in PRESETS:
        assert f"`{p.family}`" in docs, p.family


def test_entry_from_a_preset_hashes_every_file_and_sets_the_parsers(tmp_path: Path) -> None:
    d = _model(tmp_path)
    e = entry_from_preset(d, "qwen3-coder", gpu_gib=80)
    assert e.name == "qwen3-coder-30b-a3b-instruct" and e.tool_call_parser == "qwen3_coder"
    assert set(e.files) == {"config.json", "model-00001-of-00002.safetensors", "sub/tokenizer.json"}
    assert e.tensor_parallel_size == 1 and e.max_model_len == 65536
    e.verify_weights()
    g = entry_from_preset(d, "glm-4.5", name="glm", gpu_gib=80)
    argv = VllmServer(g, log_path=tmp_path / "l").command()
    assert argv[argv.index("--reasoning-parser") + 1] == "glm45"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"


def test_tensor_parallel_suggestions() -> None:
    q = get_preset("qwen3-coder")
    assert [suggest_tensor_parallel(q, g) for g in (None, 24, 40, 48, 80, 141)] == [1, 4, 4, 2, 1, 1]
    assert suggest_tensor_parallel(q, 16) == 8  # smaller than any row: twice the smallest row's


@pytest.mark.parametrize("family", ["", "qwen3", "QWEN3-CODER", "../etc", "x" * 10_000])
def test_unknown_families_are_refused_with_the_list(tmp_path: Path, family: str) -> None:
    with pytest.raises(ProviderConfigError, match="known families: qwen3-coder, qwen2.5-coder"):
        entry_from_preset(_model(tmp_path), family)


def test_a_directory_without_a_model_or_template_or_with_a_huge_context(tmp_path: Path) -> None:
    with pytest.raises(ProviderConfigError, match="not a directory"):
        entry_from_preset(tmp_path / "absent", "qwen3-coder")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ProviderConfigError, match="no config.json"):
        entry_from_preset(empty, "qwen3-coder")
    d = _model(tmp_path)
    with pytest.raises(ProviderConfigError, match="chat_template.jinja"):
        entry_from_preset(d, "smollm2")
    with pytest.raises(ProviderConfigError, match="over the qwen2.5-coder family's 32768"):
        entry_from_preset(d, "qwen2.5-coder", max_model_len=10**6)


def _abhed(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *map(str, args)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_catalog_add_writes_refuses_duplicates_and_unknown_families(tmp_path: Path,
                                                                    abhed_home: Path) -> None:
    d = _model(tmp_path, template=True)
    cat = tmp_path / "catalog.json"
    r = _abhed("catalog", "add", d, "--family", "smollm2", "--name", "demo", "--catalog", cat)
    assert r.returncode == 0, r.stderr
    entry = load_catalog(cat).get("demo")
    assert entry.chat_template == "chat_template.jinja" and len(entry.files) == 4
    again = _abhed("catalog", "add", d, "--family", "smollm2", "--name", "demo", "--catalog", cat)
    assert again.returncode == 1 and "--replace" in again.stderr
    assert _abhed("catalog", "add", d, "--family", "smollm2", "--name", "demo", "--catalog", cat,
                  "--replace").returncode == 0
    bad = _abhed("catalog", "add", d, "--family", "llama", "--catalog", cat)
    assert bad.returncode == 1 and "known families:" in bad.stderr and "glm-4.5" in bad.stderr
    # Default catalog: ABHED_HOME/catalog.json.
    assert _abhed("catalog", "add", d, "--family", "qwen3-coder").returncode == 0
    assert json.loads((abhed_home / "catalog.json").read_text())["models"][0]["tool_call_parser"] \
        == "qwen3_coder"
    fam = _abhed("catalog", "families")
    assert fam.returncode == 0 and "qwen3_coder" in fam.stdout and "openai_gptoss" in fam.stdout


def test_catalog_add_checks_max_model_len_against_the_models_config(tmp_path: Path,
                                                                   abhed_home: Path) -> None:
    # The bug: `catalog add DIR --family qwen3-coder` wrote max_model_len 65536 for a model
    # whose config.json says 8192 positions; vLLM then failed at start, deep in its log.
    d = _model(tmp_path)
    (d / "config.json").write_text(json.dumps({"model_type": "llama",
                                               "max_position_embeddings": 8192}))
    r = _abhed("catalog", "add", d, "--family", "qwen3-coder")
    assert r.returncode == 0, r.stderr
    assert json.loads((abhed_home / "catalog.json").read_text())["models"][0]["max_model_len"] == 8192
    assert ("note: max_model_len is 8192, not the qwen3-coder family's 65536: capped to the "
            "model's own limit (config.json max_position_embeddings 8192)") in r.stderr
    asked = _abhed("catalog", "add", d, "--family", "qwen3-coder", "--max-model-len", "16384",
                   "--replace")
    assert asked.returncode == 1
    assert ("max_model_len 16384 is over what the model in " in asked.stderr
            and "its config.json max_position_embeddings 8192; ask for 8192 or less "
                "(--max-model-len 8192)" in asked.stderr)
    assert json.loads((abhed_home / "catalog.json").read_text())["models"][0]["max_model_len"] == 8192
    assert entry_from_preset(d, "qwen3-coder", max_model_len=4096).max_model_len == 4096


@pytest.mark.parametrize(("config", "tokenizer", "want"), [
    ({"max_position_embeddings": 8192}, None, (8192, "config.json max_position_embeddings 8192")),
    ({"n_positions": 1024, "max_position_embeddings": 2048}, None,
     (1024, "config.json n_positions 1024")),
    ({"max_position_embeddings": 32768, "model_max_length": 131072}, None,
     (131072, "config.json model_max_length 131072")),
    ({"text_config": {"max_position_embeddings": 4096}, "max_position_embeddings": 99}, None,
     (4096, "config.json max_position_embeddings 4096")),
    ({"max_position_embeddings": 32768}, {"model_max_length": 16384},
     (16384, "tokenizer_config.json model_max_length 16384")),
    ({"max_position_embeddings": 32768}, {"model_max_length": 1e30},
     (32768, "config.json max_position_embeddings 32768")),
    ({"max_position_embeddings": 32768, "rope_scaling": {"type": "linear", "factor": 4.0}}, None,
     (131072, "config.json max_position_embeddings 32768 x rope_scaling factor 4 (linear)")),
    ({"max_position_embeddings": 131072,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, None,
     (131072, "config.json max_position_embeddings 131072")),
])
def test_a_models_own_context_limit_is_read_as_vllm_derives_it(
        tmp_path: Path, config: dict[str, object], tokenizer: dict[str, object] | None,
        want: tuple[int, str]) -> None:
    from models import ContextLimit, model_context_limit

    (tmp_path / "config.json").write_text(json.dumps(config))
    if tokenizer is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    assert model_context_limit(tmp_path) == ContextLimit(*want)


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"max_position_embeddings": "8k"}',
                                     b'{"max_position_embeddings": true}',
                                     b'{"max_position_embeddings": -5}', b"[" * 100_000,
                                     b'{"a": "' + b"x" * (5 << 20) + b'"}', b"\xff\xfe"],
                         # short ids: a 5 MB id in PYTEST_CURRENT_TEST breaks every subprocess
                         ids=["empty", "cut", "list", "text", "bool", "negative", "deep", "5MB",
                              "not-utf8"])
def test_a_config_that_names_no_usable_limit_has_none(tmp_path: Path, content: bytes) -> None:
    from models import model_context_limit

    (tmp_path / "config.json").write_bytes(content)
    assert model_context_limit(tmp_path) is None
    assert model_context_limit(tmp_path / "absent") is None
