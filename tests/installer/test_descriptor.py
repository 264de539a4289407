"""The model-server declaration's agent_config: placeholders filled, hostile input refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from installer._descriptor import expand_values, load_descriptor
from installer._errors import StepFailed

from .conftest import AGENT_CONFIG, descriptor

VALUES = {"base_url": "http://127.0.0.1:4321/v1", "served_name": "tiny", "model_dir": "/opt/m"}


def test_placeholders_are_filled_in_strings_only() -> None:
    got = expand_values({"{base_url}": ["{base_url}", 3, None, True, {"m": "{served_name}"}]},
                        VALUES, what="the agent config")
    assert got == {"{base_url}": ["http://127.0.0.1:4321/v1", 3, None, True, {"m": "tiny"}]}
    filled = expand_values(AGENT_CONFIG, VALUES, what="the agent config")
    assert filled["custom_providers"][0]["base_url"] == VALUES["base_url"]


def test_an_unknown_placeholder_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(StepFailed, match=r"unknown placeholder \{home\}.*\{base_url\}"):
        expand_values({"a": ["{home}"]}, VALUES, what="the agent config")


def test_over_deep_nesting_is_refused() -> None:
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    with pytest.raises(StepFailed, match="nested more than 32 levels"):
        expand_values(deep, VALUES, what="the agent config")


@pytest.mark.parametrize("bad", [[1, 2], "config", 5, {"a": float("inf")}],
                         ids=["list", "string", "number", "infinity"])
def test_an_agent_config_that_is_not_a_json_object_is_refused(tmp_path: Path, bad: Any) -> None:
    p = tmp_path / "abhed-serve.json"
    p.write_text(json.dumps(descriptor(agent_config=bad)))
    with pytest.raises(StepFailed, match=r"abhed-serve.json: agent_config(\.a)?: "
                                         r"(Input should be an object|inf has no JSON form)"):
        load_descriptor(p)


def test_an_oversized_declaration_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "abhed-serve.json"
    p.write_text(json.dumps(descriptor(agent_config={"pad": "x" * 300_000})))
    with pytest.raises(StepFailed, match="larger than 262144 bytes"):
        load_descriptor(p)
