"""The budget reservation tree: reserve, roll up, give back, cancel as a cascade."""

from __future__ import annotations

from appliance.loop import Budget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_reservations_count_at_once_and_the_rest_comes_back() -> None:
    clock = Clock()
    root = Budget(1000, 10, 60.0, clock=clock)
    a = root.reserve(600, 4, 30.0)
    assert a is not None and root.left_tokens() == 400 and root.left_turns() == 6
    b = root.reserve(600, 4, 30.0)  # capped at what is left, never more
    assert b is not None and b.tokens == 400 and root.left_tokens() == 0
    assert root.reserve(1, 1, 1.0) is None  # nothing left: the spawn fails cleanly
    a.charge(tokens=100, turns=2)
    a.release()
    assert root.left_tokens() == 500 and root.spent_tokens == 100 and root.left_turns() == 4
    a.release()  # twice is harmless
    assert root.left_tokens() == 500


def test_a_child_cannot_outlive_its_parents_time() -> None:
    clock = Clock()
    root = Budget(1000, 10, 10.0, clock=clock)
    clock.now = 8.0
    child = root.reserve(100, 1, 3600.0)
    assert child is not None and child.left_seconds() == 2.0
    clock.now = 10.0
    assert root.reserve(100, 1, 1.0) is None


def test_cancel_cascades_to_every_descendant() -> None:
    root = Budget(1000, 10, 60.0)
    child = root.reserve(500, 5, 30.0)
    assert child is not None
    grandchild = child.reserve(100, 1, 10.0)
    assert grandchild is not None
    hits: list[str] = []
    grandchild.on_cancel(lambda: hits.append("grandchild"))
    child.on_cancel(lambda: hits.append("child"))
    root.cancel()
    assert child.cancelled and grandchild.cancelled and sorted(hits) == ["child", "grandchild"]
    assert root.reserve(1, 1, 1.0) is None
    late: list[int] = []
    child.on_cancel(lambda: late.append(1))  # already cancelled: called at once
    assert late == [1]


def test_hostile_reservations_are_refused() -> None:
    root = Budget(1000, 10, 60.0)
    for tokens, turns, seconds in [(0, 1, 1.0), (1, 0, 1.0), (1, 1, 0.0), (-5, 1, 1.0), (1, -1, 1.0)]:
        assert root.reserve(tokens, turns, seconds) is None
    assert root.left_tokens() == 1000
