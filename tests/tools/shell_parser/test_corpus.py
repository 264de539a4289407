"""The command corpus: every case's verdict, who gives it, and the route its reason names.

The cases (tests/tools/shell_parser/corpus/shell_commands.toml) come from other
agents' command-safety tests, issue 22's misses, and the routes bash takes to
run code; each says the verdict Abhed must give and why.
"""

from __future__ import annotations

from typing import Any

import pytest

from appliance.policy import PolicyEngine, PolicySettings
from tests.tools.shell_parser.corpus_cases import CASES, CORPUS
from tools import native_tools

BASH = native_tools()["bash"]
SOURCES = {"issue-22", "issue-33", "codex", "goose", "openhands", "opencode", "abhed"}
ASKERS = {"destructive", "unparseable", "opaque"}




def _id(command: str) -> str:
    return command if len(command) <= 60 else f"{command[:40]}...({len(command)} chars)"


def decide(command: str, **settings: Any) -> tuple[str, str, str]:
    engine = PolicyEngine(PolicySettings.model_validate({"mode": "auto", **settings}))
    d = engine.decide(BASH, {"command": command, "description": "corpus"}, "/ws")
    return d.verdict, d.decided_by, d.reason


@pytest.mark.parametrize("command, case", CASES, ids=[_id(c) for c, _ in CASES])
def test_each_case_gets_its_verdict_from_the_rule_it_names(command: str, case: dict[str, Any]) -> None:
    verdict, by, reason = decide(command)
    assert (verdict, by) == (case["verdict"], case["by"]), f"{case['why']}: {reason}"
    if "contains" in case:
        assert case["contains"] in reason, reason


@pytest.mark.parametrize("command, case", [(c, k) for c, k in CASES if k["by"] in ASKERS],
                         ids=[_id(c) for c, k in CASES if k["by"] in ASKERS])
def test_what_always_asks_still_asks_under_an_allow_everything_rule(command: str,
                                                                    case: dict[str, Any]) -> None:
    verdict, by, reason = decide(command, allow=[{"tool": "bash"}])
    assert (verdict, by) == ("ask", case["by"]), reason


@pytest.mark.parametrize("command, case", [(c, k) for c, k in CASES if "always" in k],
                         ids=[_id(c) for c, k in CASES if "always" in k])
def test_an_always_answer_in_ask_mode_stores_the_rules_the_case_names(command: str,
                                                                      case: dict[str, Any]) -> None:
    engine = PolicyEngine(PolicySettings(mode="ask"))
    args = {"command": command, "description": "corpus"}
    d = engine.decide(BASH, args, "/ws")
    assert d.verdict == "ask" and [r.describe() for r in d.always] == case["always"], case["why"]
    for rule in d.always:
        engine.add_session_rule(rule)
    assert engine.decide(BASH, args, "/ws").verdict == "allow"  # the answer covers the call
    other = engine.decide(BASH, {"command": "rm notes.txt", "description": "corpus"}, "/ws")
    assert other.verdict == "ask"


def test_the_corpus_is_well_formed_and_names_its_sources() -> None:
    assert len(CASES) >= 300
    header = CORPUS.read_text(encoding="utf-8").split("[[case]]")[0]
    for source in SOURCES:
        assert source in header, f"the corpus header does not describe the source {source!r}"
    for command, case in CASES:
        assert case["source"] in SOURCES, command
        assert case["why"].strip(), command
        assert case["verdict"] == ("allow" if case["by"] == "mode:auto" else "ask"), command
    commands = [c for c, _ in CASES]
    assert len(commands) == len(set(commands)), "a command appears twice"
    for source in SOURCES:
        assert any(k["source"] == source for _, k in CASES), f"no case from {source}"
