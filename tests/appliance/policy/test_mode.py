"""resolve_mode: the operator's policy.mode is the default and the ceiling, at every door."""

from __future__ import annotations

import pytest

from appliance.policy import MODES, ModeRefused, PolicySettings, resolve_mode, stricter_or_equal


def test_no_request_takes_the_operator_mode_or_the_built_in_default() -> None:
    assert resolve_mode(None, PolicySettings(mode="plan"), door="d").mode == "plan"
    assert resolve_mode(None, PolicySettings(mode="plan"), door="d").chosen_by == "operator"
    default = resolve_mode(None, PolicySettings(), door="d")
    assert default.mode == "ask" and default.chosen_by == "default"


def test_a_caller_may_always_narrow() -> None:
    for configured in MODES:
        for wanted in MODES:
            if stricter_or_equal(wanted, configured):
                got = resolve_mode(wanted, PolicySettings(mode=configured), door="d")
                assert got.mode == wanted and got.chosen_by == "caller"


def test_a_looser_mode_is_refused_naming_the_setting_and_the_file() -> None:
    with pytest.raises(ModeRefused) as info:
        resolve_mode("auto", PolicySettings(mode="plan"), door="abhed run --mode",
                     config_file="/etc/abhed/config.json")
    text = str(info.value)
    assert text.startswith("abhed run --mode auto: refused")
    assert 'policy.mode "plan"' in text and "/etc/abhed/config.json" in text
    assert "allow_looser_mode" in text


def test_allow_looser_mode_lets_a_caller_widen() -> None:
    got = resolve_mode("auto", PolicySettings(mode="plan", allow_looser_mode=True), door="d")
    assert got.mode == "auto" and got.chosen_by == "caller"


def test_without_a_configured_mode_any_mode_may_be_chosen() -> None:
    for wanted in MODES:
        assert resolve_mode(wanted, PolicySettings(), door="d").mode == wanted


@pytest.mark.parametrize("hostile", ["AUTO", "", "auto ", "yolo", "x" * 100_000, "plan\x00"])
def test_hostile_mode_strings_are_refused(hostile: str) -> None:
    with pytest.raises(ModeRefused) as info:
        resolve_mode(hostile, PolicySettings(), door="rpc start \"mode\"")
    assert "is not a mode" in str(info.value) and len(str(info.value)) < 300
