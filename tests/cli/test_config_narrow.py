"""``abhed config narrow SIGNED FILE``: whether FILE only narrows SIGNED, by the one narrowing
module (appliance.compose), as ``abhed-installer site tighten`` asks it; and the one-line
summary ``abhed bundle diff`` prints from the same comparison.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.config import compare_settings, config

SIGNED: dict[str, Any] = {
    "policy": {"mode": "ask", "deny": [{"tool": "bash", "program": "curl", "reason": "no net"}]},
    "loop": {"max_turns": 20},  # the default is 50
    "custom_providers": [{"name": "site", "api": "openai",
                          "base_url": "http://127.0.0.1:8000/v1"}],
    "default_provider": "site",
    "sandbox": {"backend": "bwrap"},
}


def _files(tmp_path: Path, over: Any) -> tuple[Path, Path]:
    signed, file = tmp_path / "signed.json", tmp_path / "tight.json"
    signed.write_text(json.dumps(SIGNED))
    file.write_text(over if isinstance(over, str) else json.dumps(over))
    return signed, file


def _run(*args: str | Path) -> Any:
    return CliRunner().invoke(config, ["narrow", *map(str, args)])


def test_a_narrowing_gives_the_effective_settings_and_each_narrower_setting(
        tmp_path: Path) -> None:
    signed, file = _files(tmp_path, {"policy": {"mode": "plan"}, "loop": {"max_turns": 10},
                                     "events": {"redact": ["secret-[0-9]+"]}})
    r = _run(signed, file)
    assert r.exit_code == 0, r.output
    assert 'narrower: policy.mode: "ask" -> "plan"' in r.output
    assert "narrower: loop.max_turns: 20 -> 10" in r.output
    out = tmp_path / "answer.json"
    r = _run(signed, file, "--json", "--out", out)
    body = json.loads(r.output)
    assert body == json.loads(out.read_text())
    assert body["narrows"] is True and body["refusals"] == []
    settings = body["settings"]
    assert settings["policy"] == {"mode": "plan", "deny": SIGNED["policy"]["deny"]}
    assert settings["loop"] == {"max_turns": 10} and settings["events"]["redact"] == [
        "secret-[0-9]+"]
    assert settings["custom_providers"] == SIGNED["custom_providers"]  # inherited, unchanged
    assert settings["sandbox"] == {"backend": "bwrap"}  # no image_dir made up


def test_an_empty_file_changes_nothing_and_says_so(tmp_path: Path) -> None:
    signed, file = _files(tmp_path, {})
    r = _run(signed, file)
    assert r.exit_code == 0 and "changes nothing" in r.output
    body = json.loads(_run(signed, file, "--json").output)
    assert body["changes"] == [] and body["settings"] == SIGNED


@pytest.mark.parametrize(("over", "words"), [
    ({"policy": {"mode": "auto"}}, "policy.mode"),
    ({"loop": {"max_turns": 21}}, "loop.max_turns"),
    ({"sandbox": {"backend": "host"}}, "sandbox.backend"),
    ({"custom_providers": [{"name": "mine", "api": "openai", "base_url": "http://10.1.1.1/v1"}]},
     "custom_providers"),
    ({"policy": {"allow_looser_mode": True}}, "policy.allow_looser_mode"),
])
def test_every_loosening_is_refused_by_name(tmp_path: Path, over: Any, words: str) -> None:
    signed, file = _files(tmp_path, over)
    r = _run(signed, file)
    assert r.exit_code == 2, r.output
    assert f"refused: {words}" in r.output
    body = json.loads(_run(signed, file, "--json").output)
    assert body["narrows"] is False and body["settings"] is None
    assert any(w in body["refusals"][0] for w in (words,))


@pytest.mark.parametrize("content", ["{nope", '{"polcy": {}}', '{"loop": {"max_turns": "5"}}',
                                     "[1, 2]", '{"a": 1, "a": 2}'])
def test_files_that_are_not_settings_are_usage_errors(tmp_path: Path, content: str) -> None:
    signed, file = _files(tmp_path, content)
    r = _run(signed, file)
    assert r.exit_code == 2 and "Error" in r.output, r.output


def test_a_fifo_or_a_missing_file_is_refused_without_waiting(tmp_path: Path) -> None:
    signed, _ = _files(tmp_path, {})
    os.mkfifo(tmp_path / "fifo.json")
    assert _run(signed, tmp_path / "fifo.json").exit_code == 2
    assert _run(signed, tmp_path / "missing.json").exit_code == 2


def test_whole_settings_compare_what_one_leaves_out_as_its_default() -> None:
    # two bundles' settings: the newer one dropping max_turns means the default (looser)
    newer = {k: v for k, v in SIGNED.items() if k != "loop"}
    result = compare_settings(SIGNED, "old", newer, "new", whole=True)
    assert [w["setting"] for w in result.loosened] == ["loop.max_turns"]
    # as an overlay, leaving it out inherits it: nothing loosens
    assert compare_settings(SIGNED, "old", newer, "new").loosened == []
    tighter = json.loads(json.dumps(SIGNED))
    tighter["policy"]["deny"].append({"tool": "bash", "program": "wget"})
    result = compare_settings(SIGNED, "old", tighter, "new", whole=True)
    assert result.loosened == [] and [c["setting"] for c in result.changes] == ["policy.deny"]
