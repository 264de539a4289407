"""Policy path rules read patterns in the one dialect (tools.pathpattern), like glob and secrets.

Issue 11: a deny rule `conf/{a,b}.env` or `conf/[ab].env` denied nothing while
the glob tool and secret_paths understood both; `*.pem` matched at any depth
in secret_paths but only at the root in policy.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance import ConfigError
from appliance.compose import load_config
from appliance.policy import PolicyEngine, PolicySettings
from tools import ToolContext, Workspace, native_tools, run_tool
from tools.pathpattern import PatternError

TOOLS = native_tools()


def _verdict(root: Path, rules: list[dict[str, str]], path: Path, tool: str = "read") -> str:
    engine = PolicyEngine(PolicySettings.model_validate({"mode": "auto", "deny": rules}))
    return engine.decide(TOOLS[tool], {"path": str(path)}, str(root)).verdict


@pytest.mark.parametrize("pattern", ["conf/{a,b}.env", "conf/[ab].env"])
def test_regression_deny_rule_with_braces_or_class_denies(workspace: Path, pattern: str) -> None:
    rules = [{"tool": "read", "path": pattern}]
    assert _verdict(workspace, rules, workspace / "conf" / "a.env") == "deny"
    assert _verdict(workspace, rules, workspace / "conf" / "b.env") == "deny"
    assert _verdict(workspace, rules, workspace / "conf" / "c.env") == "allow"
    assert _verdict(workspace, rules, workspace / "x" / "conf" / "a.env") == "allow"


def test_a_name_pattern_denies_at_any_depth_as_secret_paths_do(workspace: Path) -> None:
    rules = [{"tool": "read", "path": "*.pem"}]
    assert _verdict(workspace, rules, workspace / "k.pem") == "deny"
    assert _verdict(workspace, rules, workspace / "deep" / "er" / "k.pem") == "deny"
    anchored = [{"tool": "read", "path": "./k.pem"}]
    assert _verdict(workspace, anchored, workspace / "deep" / "k.pem") == "allow"


def test_absolute_patterns(workspace: Path) -> None:
    inside = [{"tool": "read", "path": f"{workspace}/src/*.py"}]
    assert _verdict(workspace, inside, workspace / "src" / "a.py") == "deny"
    assert _verdict(workspace, inside, workspace / "x" / "src" / "a.py") == "allow"
    outside = [{"tool": "read", "path": "/etc/**"}]
    assert _verdict(workspace, outside, Path("/etc/passwd")) == "deny"


def test_always_rule_escapes_the_path_it_allows(workspace: Path) -> None:
    weird = workspace / "a[1]{x,y}*.txt"
    engine = PolicyEngine(PolicySettings.model_validate({"mode": "ask"}))
    decision = engine.decide(TOOLS["write"], {"path": str(weird)}, str(workspace))
    assert decision.verdict == "ask" and decision.always
    rule = decision.always[0]
    engine.add_session_rule(rule)
    assert engine.decide(TOOLS["write"], {"path": str(weird)}, str(workspace)).verdict == "allow"
    other = workspace / "a1x.txt"
    assert engine.decide(TOOLS["write"], {"path": str(other)}, str(workspace)).verdict == "ask"


def test_unreadable_rule_is_refused_at_config_load_naming_it(abhed_home: Path) -> None:
    (abhed_home / "config.json").write_text(json.dumps(
        {"policy": {"deny": [{"tool": "read", "path": "ok/**"},
                             {"tool": "read", "path": "conf/{a,b.env"}]}}))
    with pytest.raises(ConfigError) as info:
        load_config()
    text = str(info.value)
    assert "policy.deny[1].path: Pattern" in text and "never closed" in text
    (abhed_home / "config.json").write_text(json.dumps({"tools": {"secret_paths": ["[z-a]"]}}))
    with pytest.raises(ConfigError, match=r"secret_paths\[0\].*backwards"):
        load_config()


# -- the differential test: glob, secret_paths and a policy rule agree ---------

SEGMENT = st.sampled_from(["a", "b", "ab", "c.py", ".e", "*", "?", "**", "*.py", "[ab]", "[!a]",
                           "{a,b}", "{a,c.py}", "a*", "x{1..2}"])
PART = st.sampled_from(["a", "b", "ab", "ba", "c.py", ".e", "x1", "x2"])


@st.composite
def _pattern(draw: st.DrawFn) -> str:
    pattern = "/".join(draw(st.lists(SEGMENT, min_size=1, max_size=3)))
    if draw(st.integers(0, 3)) == 0:
        pattern = "./" + pattern
    if draw(st.integers(0, 4)) == 0:
        pattern += "/"
    return pattern


@settings(max_examples=200, deadline=None)
@given(pattern=_pattern(),
       files=st.lists(st.lists(PART, min_size=1, max_size=4).map("/".join), min_size=1, max_size=8))
def test_glob_secret_paths_and_policy_agree(pattern: str, files: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        made: list[str] = []
        for rel in files:
            target = root / rel
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("x")
            except (FileExistsError, NotADirectoryError, IsADirectoryError):
                continue  # one drawn path is a directory of another
            made.append(rel)
        made = [r for r in dict.fromkeys(made) if (root / r).is_file()]
        try:
            PolicySettings.model_validate({"deny": [{"tool": "read", "path": pattern}]})
        except ValueError:
            with pytest.raises(PatternError):
                Workspace(str(root), [pattern])
            return
        ctx = ToolContext(workspace=Workspace(str(root)))
        found = run_tool(TOOLS["glob"], {"pattern": pattern}, ctx)
        assert found.ok, found.content
        by_glob = {os.path.relpath(p, root) for p in found.content.splitlines()
                   if not p.startswith("[")}
        secrets = Workspace(str(root), [pattern])
        by_secret = {r for r in made if secrets.secret_reason(str(root / r)) is not None}
        by_policy = {r for r in made
                     if _verdict(root, [{"tool": "read", "path": pattern}], root / r) == "deny"}
        assert by_glob == by_secret == by_policy, pattern
