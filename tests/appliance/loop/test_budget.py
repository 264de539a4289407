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


def test_siblings_of_one_batch_share_what_is_left_fairly() -> None:
    root = Budget(1000, 11, 60.0)
    root.expect(5)  # one reply made five task calls
    kids = [root.reserve(400, 20, 30.0, keep_turns=1, label=f"task {n}") for n in range(5)]
    assert all(k is not None for k in kids)
    assert [k.turns for k in kids if k] == [2, 2, 2, 2, 2]  # (11 - 1 kept) // 5
    assert [k.tokens for k in kids if k] == [200, 200, 200, 200, 200]
    assert root.left_turns() == 1  # the one the parent keeps to read the results
    assert [label for label, _t, _n in root.reservations()] == [f"task {n}" for n in range(5)]


def test_a_reservation_is_never_smaller_than_one_request() -> None:
    root = Budget(1000, 10, 60.0)
    root.expect(4)
    assert root.reserve(400, 5, 30.0, min_tokens=300) is not None  # share 250 < 300: gets 300
    assert root.reserve(400, 5, 30.0, min_tokens=300) is not None
    assert root.reserve(400, 5, 30.0, min_tokens=300) is not None
    assert root.left_tokens() == 100
    assert root.reserve(400, 5, 30.0, min_tokens=300) is None  # 100 left: too small, refused


def test_a_childs_spend_past_its_reservation_is_charged_to_the_parent() -> None:
    root = Budget(1000, 10, 60.0)
    child = root.reserve(20, 2, 30.0)
    assert child is not None
    child.charge(tokens=30, turns=1)  # its one request cost more than it reserved
    child.release()
    assert root.spent() == (30, 1) and root.left_tokens() == 970


def test_the_fair_share_ends_with_the_batch() -> None:
    root = Budget(1000, 10, 60.0)
    root.expect(3)
    first = root.reserve(600, 4, 30.0)  # its two siblings failed before reserving anything
    root.expect(0)  # the batch is over
    later = root.reserve(600, 4, 30.0)  # a single spawn in a later turn: no share applies
    assert first is not None and later is not None
    assert (first.tokens, later.tokens) == (333, 600)
