"""The site layer narrowed by the engineer's: every setting classified, each loosening refused
with its name, the site file and what to do instead; every narrowing taken, with its origin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from appliance.compose import (
    DIRECTIONS,
    Config,
    SiteLayer,
    SiteOrigin,
    WideningRefused,
    layer,
    leaf_fields,
    rule_for,
)

SITE_FILE = Path("/etc/abhed/site")
PROVIDER = {"name": "site-llm", "api": "openai", "base_url": "http://gpu:8000/v1", "model": "m"}
SITE: dict[str, Any] = {
    "custom_providers": [PROVIDER],
    "policy": {"mode": "ask", "deny": [{"tool": "bash", "command": "curl *"}],
               "capabilities": ["fs:read", "fs:write", "shell"]},
    "sandbox": {"backend": "microvm", "image_dir": "/opt/abhed/current/image",
                "env_allow": ["LANG", "TZ"]},
    "events": {"redact": ["AKIA[0-9A-Z]{16}"], "witness_dir": "/var/lib/abhed/witness",
               "reserve_mb": 128, "rotate_mb": 32},
    "extensions": [{"name": "redact", "command": "/opt/abhed/current/bin/redact",
                    "events": ["tool_result"]}],
    "loop": {"max_turns": 40, "deadline_s": 1800},
    "tasks": {"max_concurrent": 4},
}


def site(data: dict[str, Any] | None = None) -> SiteLayer:
    settings = Config.model_validate(data if data is not None else SITE)
    settings._source = str(SITE_FILE / "settings.json")
    origin = SiteOrigin(format="abhed-site-origin/1", site="lab", release="1.0",
                        bundle_manifest_sha256="a" * 64, signing_key_ids=["k1"],
                        settings_sha256="b" * 64)
    return SiteLayer(SITE_FILE, SITE_FILE, settings, data or SITE, origin)


def user(**data: Any) -> Config:
    config = Config.model_validate(data)
    config._source = "/home/eng/.abhed/config.json"
    return config


def refused(**data: Any) -> str:
    with pytest.raises(WideningRefused) as caught:
        layer(site(), user(**data), "/home/eng/.abhed/config.json")
    text = str(caught.value)
    assert str(SITE_FILE / "settings.json") in text and "/home/eng/.abhed/config.json" in text
    return text


def test_every_setting_has_a_declared_direction() -> None:
    missing = [f for f in leaf_fields() if rule_for(f) is None]
    assert missing == [], "classify these in appliance/assembly/_layers.py DIRECTIONS"
    assert all(rule.why for rule in DIRECTIONS.values())


def test_an_unclassified_setting_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from appliance.assembly import _layers

    monkeypatch.delitem(_layers.DIRECTIONS, "loop.max_turns")
    assert rule_for("loop.max_turns") is None and "loop.max_turns" in leaf_fields()
    with pytest.raises(AssertionError, match="no declared direction"):
        layer(site(), user(), "u")


def test_no_user_settings_is_the_site_exactly() -> None:
    got = layer(site(), user(), "u")
    assert got.config.model_dump() == site().settings.model_dump() | {
        "policy": got.config.policy.model_dump()}
    assert got.origin("policy.mode").kind == "site" and got.origin("loop.max_tokens").kind == "default"
    assert got.origin("policy.deny[0]").kind == "site"  # an entry of a list the site set
    assert got.config.policy.mode == "ask" and "mode" in got.config.policy.model_fields_set


@pytest.mark.parametrize("data, setting", [
    ({"policy": {"mode": "auto"}}, "policy.mode"),
    ({"policy": {"allow_looser_mode": True}}, "policy.allow_looser_mode"),
    ({"policy": {"allow": [{"tool": "bash"}]}}, "policy.allow"),
    ({"policy": {"capabilities": ["fs:read", "mcp"]}}, "policy.capabilities"),
    ({"policy": {"capabilities": None}}, "policy.capabilities"),
    ({"sandbox": {"backend": "host"}}, "sandbox.backend"),
    ({"sandbox": {"backend": "bwrap"}}, "sandbox.backend"),
    ({"sandbox": {"image_dir": "/home/eng/image"}}, "sandbox.image_dir"),
    ({"sandbox": {"qemu_binary": "/home/eng/fake-qemu"}}, "sandbox.qemu_binary"),
    ({"sandbox": {"env_allow": ["LANG", "AWS_SECRET_ACCESS_KEY"]}}, "sandbox.env_allow"),
    ({"sandbox": {"memory_mib": 65536}}, "sandbox.memory_mib"),
    ({"events": {"witness_dir": None}}, "events.witness_dir"),
    ({"events": {"witness_dir": "/tmp/mine"}}, "events.witness_dir"),
    ({"events": {"reserve_mb": 0}}, "events.reserve_mb"),
    ({"events": {"rotate_mb": 0}}, "events.rotate_mb"),
    ({"tools": {"secret_paths": ["!*.pem"]}}, "tools.secret_paths"),
    ({"tools": {"read_max_output_chars": 10_000_000}}, "tools.read_max_output_chars"),
    ({"mcp_servers": [{"name": "mine", "command": "x"}]}, "mcp_servers"),
    ({"custom_providers": [PROVIDER | {"name": "mine", "base_url": "http://evil/v1"}]},
     "custom_providers"),
    ({"custom_providers": [PROVIDER | {"base_url": "http://evil/v1"}]}, "custom_providers.site-llm"),
    ({"extensions": [{"name": "mine", "command": "x", "events": ["tool_call"]}]}, "extensions"),
    ({"extensions": [{"name": "redact", "command": "/bin/true", "events": ["tool_result"]}]},
     "extensions.redact"),
    ({"loop": {"max_turns": 41}}, "loop.max_turns"),
    ({"loop": {"max_repeated_failures": 0}}, "loop.max_repeated_failures"),
    ({"tasks": {"max_concurrent": 5}}, "tasks.max_concurrent"),
    ({"site": {"allow_user_allow_rules": True}}, "site.allow_user_allow_rules"),
    ({"catalog": "/home/eng/catalog.json"}, None),  # the site named none: the engineer's own
])
def test_each_loosening_is_refused_naming_the_setting(data: dict[str, Any], setting: str | None) -> None:
    if setting is None:
        assert layer(site(), user(**data), "u").origin("catalog").kind == "user"
        return
    text = refused(**data)
    assert f"{setting}:" in text


def test_every_refusal_is_named_at_once() -> None:
    text = refused(policy={"mode": "auto", "allow": [{"tool": "bash"}]}, sandbox={"backend": "host"})
    assert "3 setting(s)" in text
    assert "Choose one of plan, ask" in text and "Choose one of microvm" in text
    assert "site.allow_user_allow_rules" in text


def test_narrowing_is_taken_with_its_origin() -> None:
    mine = "/home/eng/.abhed/config.json"
    got = layer(site(), user(policy={"mode": "plan", "deny": [{"tool": "write", "path": "prod/**"}],
                                     "capabilities": ["fs:read"]},
                             tools={"secret_paths": ["*.kdbx", "company.key"]},
                             events={"redact": ["ghp_[A-Za-z0-9]{36}"], "reserve_mb": 256},
                             loop={"max_turns": 10}, sandbox={"env_allow": ["LANG"]}), mine)
    c = got.config
    assert c.policy.mode == "plan" and got.origin("policy.mode").where == mine
    assert [r.tool for r in c.policy.deny] == ["bash", "write"]
    assert got.origin("policy.deny[0]").kind == "site" and got.origin("policy.deny[1]").kind == "user"
    assert c.policy.capabilities == ["fs:read"]
    assert "company.key" in c.tools.secret_paths and "*.pem" in c.tools.secret_paths
    assert c.events.redact == ("AKIA[0-9A-Z]{16}", "ghp_[A-Za-z0-9]{36}")
    assert c.events.reserve_mb == 256 and c.loop.max_turns == 10 and c.sandbox.env_allow == ("LANG",)
    assert c.events.witness_dir == "/var/lib/abhed/witness"  # kept
    assert [e.name for e in c.extensions] == ["redact"] and c.custom_providers[0].name == "site-llm"


def test_the_sites_switches_let_an_engineer_add_within_them() -> None:
    data = json.loads(json.dumps(SITE))
    data["site"] = {"allow_user_extensions": True, "allow_user_allow_rules": True}
    veto = {"name": "mine", "command": "/home/eng/veto", "events": ["tool_call"]}
    got = layer(site(data), user(extensions=[veto], policy={"allow": [{"tool": "read"}]}), "u")
    assert [e.name for e in got.config.extensions] == ["redact", "mine"]
    assert got.origin("extensions[1]").kind == "user"
    with pytest.raises(WideningRefused, match="not add tools"):
        layer(site(data), user(extensions=[veto | {"events": ["list_tools", "tool_call"]}]), "u")
    with pytest.raises(WideningRefused, match="must list its events"):
        layer(site(data), user(extensions=[veto | {"events": []}]), "u")


def test_flags_narrow_like_the_file_and_are_named() -> None:
    got = layer(site(), user(), "u", {"loop.max_turns": (5, "abhed run --max-turns")})
    assert got.config.loop.max_turns == 5 and got.origin("loop.max_turns").where == "abhed run --max-turns"
    with pytest.raises(WideningRefused, match="abhed run --deadline-s asks for 99999"):
        layer(site(), user(), "u", {"loop.deadline_s": (99999.0, "abhed run --deadline-s")})


def test_a_development_checkout_is_the_users_config_alone() -> None:
    mine = user(policy={"mode": "auto", "allow_looser_mode": True}, sandbox={"backend": "host"})
    got = layer(None, mine, "u")
    assert got.config.policy.mode == "auto" and got.config.sandbox.backend == "host"
    assert got.origin("policy.mode").kind == "user" and got.origin("loop.max_turns").kind == "default"
    # Nobody set the mode: no ceiling, as before (a developer's own machine).
    assert "mode" not in layer(None, user(), "u").config.policy.model_fields_set


def test_the_effective_digest_changes_with_what_governs() -> None:
    a = layer(site(), user(), "u").digest
    assert a == layer(site(), user(), "u").digest
    assert a != layer(site(), user(loop={"max_turns": 3}), "u").digest


def test_the_docs_table_lists_every_setting_with_its_direction() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    table = doc[doc.index("## What an engineer may change"):].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().strip("`"): line for line in table.splitlines()
            if line.startswith("| `")}
    assert sorted(rows) == sorted(DIRECTIONS), "regenerate the table in docs/configuration.md"
    for key, rule in DIRECTIONS.items():
        assert rule.why in rows[key] and (rule.switch is None or rule.switch in rows[key])


def test_a_mode_the_engineer_narrowed_is_refused_naming_their_own_file() -> None:
    from appliance.compose import choose_mode
    from appliance.policy import ModeRefused

    mine = "/home/eng/.abhed/config.json"
    config = layer(site(), user(policy={"mode": "plan"}), mine).config
    with pytest.raises(ModeRefused) as caught:
        choose_mode(config, "ask", door="abhed run --mode")
    text = str(caught.value)
    assert f'"plan" in your own {mine}' in text and "change policy.mode there" in text
    assert '"ask"' in text and "allow_looser_mode" not in text
    # The site's own ceiling is refused in the site's words.
    with pytest.raises(ModeRefused, match="operator's policy.mode"):
        choose_mode(layer(site(), user(), mine).config, "auto", door="abhed run --mode")


def test_no_provider_names_the_config_file_abhed_home_points_at(abhed_home: Path,
                                                                 tmp_path: Path) -> None:
    # The bug: "add one to custom_providers in config.json" named no file, and with
    # ABHED_HOME set the file is not ~/.abhed/config.json.
    from appliance._errors import ConfigError
    from appliance.compose import choose_provider, load_config

    with pytest.raises(ConfigError) as absent:
        choose_provider(load_config(None), None)
    assert f"in {abhed_home / 'config.json'} (it does not exist yet: create it)" in str(absent.value)
    (abhed_home / "config.json").write_text("{}")
    with pytest.raises(ConfigError) as empty:
        choose_provider(load_config(None), None)
    assert f"in {abhed_home / 'config.json'} (see docs/providers.md)" in str(empty.value)
    other = tmp_path / "mine.json"
    other.write_text("{}")
    with pytest.raises(ConfigError, match=f"in {other} "):
        choose_provider(load_config(other), None)


def test_the_docs_tools_table_lists_every_tools_key_and_the_sections_table_is_one_table() -> None:
    # The bug: the tools table left out read_max_output_chars and grep_engine, and a blank
    # line split the sections table in two (Markdown then shows `site` as stray text).
    from tools import ToolSettings

    doc = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    tools = doc[doc.index("\n## tools\n"):].split("\n## ", 2)[1]
    rows = {line.split("|")[1].strip().strip("`") for line in tools.splitlines()
            if line.startswith("| `")}
    assert rows == set(ToolSettings.model_fields), "add the missing keys to docs/configuration.md"
    sections = doc[doc.index("## Sections"):].split("\n## ", 1)[0]
    table = [line for line in sections.splitlines() if line.startswith("|")]
    block = sections[sections.index(table[0]):sections.index(table[-1]) + len(table[-1])]
    assert "\n\n" not in block, "a blank line splits the sections table"
    assert {c.strip("`") for line in table[2:] for c in
            line.split("|")[1].strip().split(", ")} == set(Config.model_fields)


def test_the_modes_a_door_may_offer_are_those_the_site_and_the_engineer_allow() -> None:
    """The ACP mode menu: a mode choose_mode would refuse is never offered."""
    from appliance.compose import allowed_modes

    ask = {**SITE, "policy": {**SITE.get("policy", {}), "mode": "ask"}}
    assert allowed_modes(layer(site(ask), user(), "/home/eng/.abhed/config.json").config) == (
        "plan", "ask")
    narrowed = layer(site(ask), user(policy={"mode": "plan"}), "/home/eng/.abhed/config.json")
    assert allowed_modes(narrowed.config) == ("plan",)
    loose = {**ask, "policy": {**ask["policy"], "allow_looser_mode": True}}
    assert allowed_modes(layer(site(loose), user(), "/x").config) == ("plan", "ask", "auto")
    assert allowed_modes(Config()) == ("plan", "ask", "auto")  # a development checkout
