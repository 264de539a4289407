"""The one ordered mode type: every "is this stricter?" in the tree asks it."""

from __future__ import annotations

import pytest

from foundation import MODES, as_mode, modes_no_looser, stricter_or_equal


def test_the_order_is_strictest_first() -> None:
    assert MODES == ("plan", "ask", "auto")
    assert stricter_or_equal("plan", "ask") and stricter_or_equal("ask", "auto")
    assert not stricter_or_equal("auto", "ask") and not stricter_or_equal("ask", "plan")
    assert all(stricter_or_equal(m, m) for m in MODES)


def test_modes_no_looser_are_what_a_caller_may_choose() -> None:
    assert modes_no_looser("plan") == ("plan",)
    assert modes_no_looser("ask") == ("plan", "ask")
    assert modes_no_looser("auto") == MODES


@pytest.mark.parametrize("hostile", ["AUTO", "", "auto ", "plan\x00", None, 0, ["plan"], "x" * 10_000])
def test_as_mode_refuses_what_names_no_mode(hostile: object) -> None:
    assert as_mode(hostile) is None


def test_as_mode_takes_each_mode() -> None:
    assert [as_mode(m) for m in MODES] == list(MODES)
