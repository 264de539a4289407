"""Declared sampling, provider config and the catalog: refused at startup, with the fix named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models import (
    KNOWN_SAMPLING,
    Catalog,
    CatalogEntry,
    ProviderConfig,
    ProviderConfigError,
    ServeError,
    check_sampling,
    hash_weights,
    load_catalog,
)
from models._catalog import MAX_CATALOG_BYTES


def test_undeclared_value_names_the_parameter_and_the_list() -> None:
    with pytest.raises(ProviderConfigError) as info:
        check_sampling("p", ["temperature", "seed"], {"top_k": 4})
    assert "'top_k'" in str(info.value) and "[temperature, seed]" in str(info.value)


def test_declared_but_unhonoured_is_refused() -> None:
    with pytest.raises(ProviderConfigError, match="'min_p'.*does not honour.*temperature, seed"):
        check_sampling("p", ["temperature", "min_p"], {}, honoured=["temperature", "seed"])
    with pytest.raises(ProviderConfigError, match="'mirostat'"):
        check_sampling("p", ["mirostat"], {})


@pytest.mark.parametrize(("name", "bad"), [
    ("temperature", -1), ("temperature", float("nan")), ("temperature", "hot"), ("temperature", True),
    ("top_p", 0), ("top_p", 1.5), ("top_k", -2), ("top_k", 1.5), ("min_p", 2), ("seed", 1.0),
    ("presence_penalty", 3), ("frequency_penalty", -2.5), ("repetition_penalty", 0),
    ("max_tokens", 0), ("stop", "x"), ("stop", [""]), ("stop", ["a"] * 17),
])
def test_out_of_range_values_are_refused_with_the_rule(name: str, bad: object) -> None:
    with pytest.raises(ProviderConfigError, match=f"{name} = .*must be"):
        check_sampling("p", [name], {name: bad})


def test_good_values_pass_through() -> None:
    values = {"temperature": 0, "top_p": 1, "top_k": -1, "seed": 7, "stop": ["\n\n"]}
    assert check_sampling("p", list(values), values) == values


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=200)
@given(st.dictionaries(st.sampled_from(sorted(KNOWN_SAMPLING)),
                       st.one_of(st.integers(), st.floats(), st.text(max_size=5), st.none())))
def test_check_never_raises_anything_but_its_own_error(values: dict[str, object]) -> None:
    try:
        out = check_sampling("p", list(KNOWN_SAMPLING), values)
    except ProviderConfigError:
        return
    assert out == values


def _provider(**kw: object) -> dict[str, object]:
    return {"name": "p", "api": "openai", "base_url": "http://127.0.0.1:8000/v1", **kw}


def test_provider_config_shape_of_the_specification() -> None:
    conf = ProviderConfig.model_validate({"name": "internal-vllm", "api": "openai",
                                          "base_url": "https://llm.internal.example/v1",
                                          "sampling": ["temperature", "top_p", "top_k", "seed"]})
    assert conf.base_urls == ["https://llm.internal.example/v1"]
    multi = ProviderConfig.model_validate(_provider(base_url=["http://a:1/v1/", "http://b:2/v1"]))
    assert multi.base_urls == ["http://a:1/v1", "http://b:2/v1"]


@pytest.mark.parametrize(("kw", "words"), [
    ({"api": "anthropic"}, "api 'anthropic' is not supported"),
    ({"api": ""}, "not supported"),
    ({"base_url": "ftp://x/v1"}, "http:// or https://"),
    ({"base_url": "http://user:pw@x/v1"}, "credentials"),
    ({"base_url": []}, "at least one"),
    ({"base_url": ["http://x/v1"] * 33}, "more than 32"),
    ({"params": {"temperature": 0.2}}, "not in its declared list"),
    ({"sampling": ["temperature"], "params": {"temperature": -0.5}}, "must be a number >= 0"),
    ({"name": "../etc"}, "name"),
    ({"surprise": 1}, "surprise"),
])
def test_bad_provider_configs_are_refused(kw: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ProviderConfig.model_validate(_provider(**kw))


def test_config_json_refuses_duplicates_and_unknown_default(abhed_home: Path) -> None:
    from appliance import ConfigError
    from appliance.compose import load_config

    (abhed_home / "config.json").write_text(json.dumps({"custom_providers": [_provider(), _provider()]}))
    with pytest.raises(ConfigError, match="repeated: p"):
        load_config()
    (abhed_home / "config.json").write_text(json.dumps({"custom_providers": [_provider()],
                                                         "default_provider": "q"}))
    with pytest.raises(ConfigError, match="default_provider 'q'"):
        load_config()
    (abhed_home / "config.json").write_text(json.dumps({"custom_providers": [_provider(sampling=["top_k"],
                                                                                       params={"top_k": 0.5})]}))
    with pytest.raises(ConfigError, match="top_k = 0.5"):
        load_config()


def test_catalog_verifies_every_weights_file(tmp_path: Path) -> None:
    w = tmp_path / "w"
    (w / "sub").mkdir(parents=True)
    (w / "config.json").write_text("{}")
    (w / "sub" / "model.safetensors").write_bytes(b"\0" * 1000)
    entry = CatalogEntry(name="m", served_name="m", weights_dir="w", files=hash_weights(w))
    assert set(entry.files) == {"config.json", "sub/model.safetensors"}
    assert entry.verify_weights(tmp_path) == w
    (w / "sub" / "model.safetensors").write_bytes(b"\1" * 1000)
    with pytest.raises(ServeError, match="altered") as info:
        entry.verify_weights(tmp_path)
    assert info.value.reason == "weights_altered"
    (w / "config.json").unlink()
    with pytest.raises(ServeError, match="missing"):
        entry.verify_weights(tmp_path)
    with pytest.raises(ServeError, match="not a directory"):
        entry.verify_weights(tmp_path / "elsewhere")


@pytest.mark.parametrize("bad", [
    {"tool_call_parser": "guess"}, {"files": {"../x": "0" * 64}}, {"files": {"a": "xyz"}},
    {"sampling": ["mirostat"]}, {"tensor_parallel_size": 0}, {"max_model_len": 1},
])
def test_bad_catalog_entries_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        CatalogEntry.model_validate({"name": "m", "served_name": "m", "weights_dir": "/w", **bad})


def test_load_catalog_errors_and_lookup(tmp_path: Path) -> None:
    assert load_catalog(tmp_path / "absent.json").models == ()
    (tmp_path / "c.json").write_text("[1]")
    with pytest.raises(ProviderConfigError, match="JSON object"):
        load_catalog(tmp_path / "c.json")
    (tmp_path / "c.json").write_text("{bad")
    with pytest.raises(ProviderConfigError, match="line 1, column 2: not valid JSON"):
        load_catalog(tmp_path / "c.json")
    # every invalid field, each at its location, strictly (no "5" for a number)
    (tmp_path / "c.json").write_text(json.dumps({"models": [
        {"name": "a", "served_name": "A"},
        {"name": "b", "served_name": "B", "weights_dir": "wb", "max_model_len": "5"}],
        "typo": 1}))
    with pytest.raises(ProviderConfigError) as info:
        load_catalog(tmp_path / "c.json")
    text = str(info.value)
    for where in ("models[0].weights_dir: required", "models[1].max_model_len: Input should be "
                  "a valid integer", "typo: unknown key"):
        assert f"model catalog {tmp_path / 'c.json'}: {where}" in text, text
    os.mkfifo(tmp_path / "fifo.json")  # refused at once, never waited on
    with pytest.raises(ProviderConfigError, match="named pipe"):
        load_catalog(tmp_path / "fifo.json")
    (tmp_path / "big.json").write_bytes(b" " * (MAX_CATALOG_BYTES + 1))
    with pytest.raises(ProviderConfigError, match="larger than"):
        load_catalog(tmp_path / "big.json")
    (tmp_path / "c.json").write_text(json.dumps({"models": [{"name": "a", "served_name": "A",
                                                             "weights_dir": "wa"}]}))
    cat = load_catalog(tmp_path / "c.json")
    assert cat.get(None).name == "a" and cat.get("A").name == "a" and cat.base() == tmp_path
    with pytest.raises(ProviderConfigError, match="has: a"):
        cat.get("b")
    with pytest.raises(ProviderConfigError, match="empty"):
        Catalog().get(None)
