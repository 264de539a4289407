"""todo and plan (§9): the whole list each call, exactly one in_progress, teaching errors,
nothing changes on a refused list, and hostile input (10,000 items, huge text, wrong types)."""

from __future__ import annotations

import json
from typing import Any

from tools.plan import MAX_STEPS, render_plan
from tools.todo import MAX_ITEMS, render_todo


def _items(*specs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"id": i, "content": f"step {i}", "status": s} for i, s in specs]


def test_todo_records_the_whole_list_and_says_what_is_active(h: Any) -> None:
    res = h.ok(h.call("todo", {"items": _items(("1", "done"), ("2", "in_progress"), ("3", "pending"))}))
    assert res.details["todo"] == _items(("1", "done"), ("2", "in_progress"), ("3", "pending"))
    assert res.details["in_progress"] == "2" and res.details["open"] == 2
    assert "now working on '2'" in res.content
    assert "[x] 1: step 1\n[>] 2: step 2\n[ ] 3: step 3" in res.content


def test_two_in_progress_refused_naming_both_ids(h: Any) -> None:
    res = h.err(h.call("todo", {"items": _items(("a", "in_progress"), ("b", "in_progress"))}),
                "invalid_arguments")
    assert "'a'" in res.content and "'b'" in res.content
    assert "not changed" in res.content
    assert "todo" not in res.details


def test_open_items_with_none_in_progress_refused(h: Any) -> None:
    res = h.err(h.call("todo", {"items": _items(("a", "pending"), ("b", "pending"))}),
                "invalid_arguments")
    assert "none is in_progress" in res.content and "'a'" in res.content


def test_all_done_and_empty_lists_are_fine(h: Any) -> None:
    assert "all 2 items done" in h.ok(h.call("todo", {"items": _items(("a", "done"), ("b", "done"))})).content
    res = h.ok(h.call("todo", {"items": []}))
    assert res.details["todo"] == [] and "cleared" in res.content


def test_duplicate_ids_refused(h: Any) -> None:
    res = h.err(h.call("todo", {"items": _items(("a", "in_progress"), ("a", "pending"))}),
                "invalid_arguments")
    assert "repeated: 'a'" in res.content


def test_malformed_todo_lists_teach(h: Any) -> None:
    cases: list[Any] = [
        {},
        {"items": "1. write tests"},
        {"items": [{"id": "1", "content": "x"}]},
        {"items": [{"id": "1", "content": "x", "status": "completed"}]},
        {"items": [{"id": 1, "content": "x", "status": "done"}]},
        {"items": [{"id": "1", "content": "", "status": "done"}]},
        {"items": [{"id": "1", "content": "x", "status": "done", "priority": "high"}]},
        {"items": [None]},
        {"todos": []},
        ["not", "an", "object"],
    ]
    for args in cases:
        res = h.err(h.call("todo", args), "invalid_arguments")
        assert "Nothing was run" in res.content or "must be" in res.content, (args, res.content)


def test_ten_thousand_items_refused_with_the_cap(h: Any) -> None:
    items = [{"id": str(n), "content": "x", "status": "pending"} for n in range(10_000)]
    res = h.err(h.call("todo", {"items": items}), "invalid_arguments")
    assert str(MAX_ITEMS) in res.content
    assert len(res.content) < 2000


def test_huge_content_refused_and_newlines_folded(h: Any) -> None:
    res = h.err(h.call("todo", {"items": [{"id": "1", "content": "x" * 1_000_000,
                                           "status": "in_progress"}]}), "invalid_arguments")
    assert len(res.content) < 2000
    ok = h.ok(h.call("todo", {"items": [{"id": "1", "content": "fix\nthe\ttests",
                                         "status": "in_progress"}]}))
    assert ok.details["todo"][0]["content"] == "fix the tests"


def test_render_todo_tolerates_what_an_old_log_holds() -> None:
    assert render_todo([]) == "(the todo list is empty)"
    assert render_todo([{"id": "1", "content": "x", "status": "weird"}]) == "[?] 1: x"


def test_plan_records_and_renders(h: Any) -> None:
    res = h.ok(h.call("plan", {"title": "Port the parser", "notes": "parser.py is 2k lines",
                               "steps": [{"step": "read parser.py", "status": "done"},
                                         {"step": "write tests", "status": "in_progress"},
                                         {"step": "port"}]}))
    plan = res.details["plan"]
    assert plan["steps"][2] == {"step": "port", "status": "pending"}
    assert render_plan(plan) in res.content
    assert "1. [x] read parser.py" in res.content and "Notes: parser.py is 2k lines" in res.content


def test_plan_two_in_progress_refused(h: Any) -> None:
    res = h.err(h.call("plan", {"title": "t", "steps": [{"step": "a", "status": "in_progress"},
                                                        {"step": "b", "status": "in_progress"}]}),
                "invalid_arguments")
    assert "1, 2" in res.content


def test_plan_hostile_input(h: Any) -> None:
    for args in [{"title": "t", "steps": []}, {"title": "", "steps": [{"step": "a"}]},
                 {"title": "t", "steps": [{"step": "a"}] * (MAX_STEPS + 1)},
                 {"title": "t", "steps": [{"step": "a"}], "notes": "n" * 100_000},
                 {"title": "t", "steps": [{"step": "a", "status": "approved"}]},
                 {"title": "t", "steps": [{"step": "a"}], "exit_plan_mode": True}]:
        res = h.err(h.call("plan", args), "invalid_arguments")
        assert len(res.content) < 2000, json.dumps(args)[:100]


def test_todo_and_plan_are_read_only_tools(h: Any) -> None:
    # Plan mode allows what does not mutate; both must be usable there.
    for name in ("todo", "plan"):
        assert h.tools[name].mutates is False
        assert h.tools[name].capabilities == frozenset()


def test_the_same_todo_list_again_says_nothing_changed(h: Any) -> None:
    items = _items(("1", "in_progress"), ("2", "pending"))
    first = h.ok(h.call("todo", {"items": items}))
    assert first.details["changed"] is True and first.content.startswith("Todo list updated")
    again = h.ok(h.call("todo", {"items": items}))
    assert again.details["changed"] is False
    assert again.content.startswith("Todo list unchanged: it is the same as the current list.")
    moved = h.ok(h.call("todo", {"items": _items(("1", "done"), ("2", "in_progress"))}))
    assert moved.details["changed"] is True


def test_the_same_plan_again_says_nothing_changed(h: Any) -> None:
    plan = {"title": "Port", "steps": [{"step": "read", "status": "in_progress"}]}
    assert h.ok(h.call("plan", plan)).details["changed"] is True
    again = h.ok(h.call("plan", plan))
    assert again.details["changed"] is False and again.content.startswith("Plan unchanged")


def test_a_long_todo_list_comes_back_bounded(h: Any) -> None:
    # 100 items of 500 characters came back as 51,049 characters with truncated: false.
    items = [{"id": f"t{n}", "content": f"item {n} " + "x" * 490,
              "status": "done" if n < 40 else ("in_progress" if n == 40 else "pending")}
             for n in range(MAX_ITEMS)]
    res = h.ok(h.call("todo", {"items": items}))
    assert res.truncated and len(res.content) <= 8200
    assert res.details["todo"] == items  # the list itself is kept whole
    assert "[>] t40: item 40" in res.content and "[x] done: t0, t1," in res.content
    assert "also open, not shown:" in res.content and "t99" in res.content  # every id is named
    # An item sent by id and status keeps its content, so a cut list can be sent again.
    short = [{"id": i["id"], "status": i["status"]} for i in items]
    again = h.ok(h.call("todo", {"items": short}))
    assert again.details["todo"] == items and again.details["changed"] is False
    new = h.err(h.call("todo", {"items": [*short[:-1], {"id": "new", "status": "pending"}]}),
                "invalid_arguments")
    assert "'new' has no content" in new.content


def test_render_todo_bounded_keeps_short_lists_whole() -> None:
    from tools.todo import render_todo_bounded

    items = _items(("a", "in_progress"), ("b", "pending"))
    assert render_todo_bounded(items) == (render_todo(items), False)
