"""Argument validation (§0, issue 2): refused before anything runs, naming the field,
what was expected and what was given; hostile and oversized input answered cleanly."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tools import Tool, native_tools

ALL_TOOLS = native_tools()
# The file tools this suite owns; the generic checks below also run on every native tool.
TOOLS = {name: ALL_TOOLS[name] for name in ("read", "write", "edit", "glob")}


def _valid(name: str, root: Path) -> dict[str, Any]:
    return {
        "read": {"path": str(root / "f.txt")},
        "write": {"path": str(root / "f.txt"), "content": "x"},
        "edit": {"path": str(root / "f.txt"), "old_string": "a", "new_string": "b"},
        "glob": {"pattern": "*"},
    }[name]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_unknown_field_is_refused_naming_it_and_the_allowed_ones(h: Any, name: str) -> None:
    (h.root / "f.txt").write_text("a\n")
    before = _snapshot(h.root)
    res = h.err(h.call(name, {**_valid(name, h.root), "verbose": True}), "invalid_arguments")
    assert "`verbose` is not a parameter of " + name in res.content
    for field in TOOLS[name].args_model.model_fields:
        assert field in res.content
    assert "Nothing was run" in res.content
    assert res.details["fields"] == [{"field": "verbose", "problem": "extra_forbidden"}]
    assert _snapshot(h.root) == before


@pytest.mark.parametrize("name", sorted(ALL_TOOLS))
def test_every_missing_required_field_is_named(h: Any, name: str) -> None:
    required = [f for f, info in ALL_TOOLS[name].args_model.model_fields.items() if info.is_required()]
    res = h.err(h.call(name, {}), "invalid_arguments")
    for field in required:
        assert f"`{field}` is required but missing" in res.content
    assert {f["field"] for f in res.details["fields"]} == set(required)


@pytest.mark.parametrize(
    ("name", "field", "value", "expected", "given"),
    [
        ("read", "offset", "5", "must be an integer", 'got string "5"'),
        ("read", "limit", 2.0, "must be an integer", "got number 2.0"),
        ("read", "limit", True, "must be an integer", "got boolean true"),
        ("read", "path", 42, "must be a string", "got integer 42"),
        ("read", "path", ["/a"], "must be a string", 'got array ["/a"]'),
        ("read", "path", None, "must be a string", "got null"),
        ("write", "content", {"a": 1}, "must be a string", 'got object {"a": 1}'),
        ("write", "content", b"bytes".decode() and 7, "must be a string", "got integer 7"),
        ("edit", "replace_all", "true", "must be a boolean", 'got string "true"'),
        ("edit", "replace_all", 1, "must be a boolean", "got integer 1"),
        ("edit", "old_string", 1.5, "must be a string", "got number 1.5"),
        ("glob", "pattern", ["*.py"], "must be a string", 'got array ["*.py"]'),
        ("glob", "path", 0, "must be a string", "got integer 0"),
    ],
)
def test_wrong_type_is_refused_without_coercion(
    h: Any, name: str, field: str, value: Any, expected: str, given: str
) -> None:
    (h.root / "f.txt").write_text("a\n")
    before = _snapshot(h.root)
    res = h.err(h.call(name, {**_valid(name, h.root), field: value}), "invalid_arguments")
    assert f"`{field}` {expected}" in res.content
    assert given in res.content
    assert _snapshot(h.root) == before


def test_bounds_are_checked_naming_the_field_and_value(h: Any) -> None:
    (h.root / "f.txt").write_text("a\n")
    for field in ("offset", "limit"):
        for bad in (0, -3):
            res = h.err(h.read(h.root / "f.txt", **{field: bad}), "invalid_arguments")
            assert f"`{field}`" in res.content and str(bad) in res.content
            assert "greater than or equal to 1" in res.content


@pytest.mark.parametrize("raw", [None, "path=/x", 5, 1.5, True, ["/x"], [], '{"path": "/x"}'])
@pytest.mark.parametrize("name", sorted(ALL_TOOLS))
def test_non_object_arguments_are_refused_naming_the_type(h: Any, name: str, raw: Any) -> None:
    res = h.err(h.call(name, raw), "invalid_arguments")
    assert f"Arguments for {name} must be a JSON object" in res.content
    kind = {type(None): "null", str: "string", int: "integer", float: "number", bool: "boolean",
            list: "array"}[type(raw)]
    assert f"got {kind}" in res.content


def test_several_problems_are_all_reported_at_once(h: Any) -> None:
    res = h.err(h.call("edit", {"path": 3, "new_string": "x", "bogus": 1}), "invalid_arguments")
    assert "`path` must be a string" in res.content
    assert "`old_string` is required but missing" in res.content
    assert "`bogus` is not a parameter of edit" in res.content


def test_a_huge_given_value_is_shown_shortened(h: Any) -> None:
    res = h.err(h.call("read", {"path": "/x", "offset": "9" * 100_000}), "invalid_arguments")
    assert len(res.content) < 1000
    assert "..." in res.content


# -- hostile and oversized input to every entry point -------------------------

HOSTILE_STRINGS = [
    "",
    " ",
    "\x00",
    "/\x00/etc/passwd",
    "a" * 1_000_000,
    "/" + "a/" * 5000 + "f",
    "/" + "x" * 5000,
    "\ud800",  # a lone surrogate: not encodable as UTF-8
    "\u202e\u2066evil\u2069",  # bidi controls
    "e\u0301\u0301\u0301" * 1000,  # stacked combining marks
    "😀" * 1000,
    "\r\n\t\x0b\x0c\x1b[31m",
    "../../../../etc/passwd",
    "~/.ssh/id_rsa",
    "${HOME}/x",
    "$(rm -rf /)",
    "*" * 1000,
    "{" * 1000,
    "[" * 1000,
    "**/" * 2000 + "*",
]


def _hostile_args(name: str, root: Path, s: str) -> list[dict[str, Any]]:
    target = str(root / "f.txt")
    inside = str(root) + "/" + s  # absolute, beneath the workspace
    if name == "read":
        return [{"path": s}, {"path": inside}, {"path": target, "offset": 10**30},
                {"path": target, "limit": 10**30}]
    if name == "write":
        return [{"path": s, "content": "x"}, {"path": inside, "content": s}]
    if name == "edit":
        return [{"path": s, "old_string": "a", "new_string": "b"},
                {"path": inside, "old_string": "", "new_string": s + "!"},
                {"path": target, "old_string": s or "zz", "new_string": s + "!"}]
    return [{"pattern": s}, {"pattern": "*", "path": s}, {"pattern": "*", "path": inside}]


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_hostile_strings_get_a_clear_answer_and_lose_nothing(h: Any, name: str) -> None:
    (h.root / "f.txt").write_text("a\n")
    (h.root / "keep").mkdir()
    (h.root / "keep" / "data.txt").write_bytes(b"precious\n")
    h.read(h.root / "f.txt")
    before = _snapshot(h.root)
    for s in HOSTILE_STRINGS:
        for args in _hostile_args(name, h.root, s):
            res = h.call(name, args)  # the harness asserts shape and no internal_error
            assert len(res.content) <= 20_000, res.content[:300]
            if not res.ok:
                assert res.error is not None and res.error.message == res.content
    after = _snapshot(h.root)
    # Nothing pre-existing was lost or altered (write/edit may only have created files).
    for path, data in before.items():
        assert after.get(path) == data
    assert after[str(h.root / "keep" / "data.txt")] == b"precious\n"
    assert not list(h.root.glob(".*.tmp")) and not list(h.root.rglob("*.abhed-*.tmp"))


def test_deeply_nested_json_arguments_are_refused_cleanly(h: Any) -> None:
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    for name in TOOLS:
        res = h.call(name, {**_valid(name, h.root), "path": deep} if name != "glob"
                     else {"pattern": deep})
        h.err(res, "invalid_arguments")
        assert len(res.content) < 2000
    nested_obj: Any = {}
    cur = nested_obj
    for _ in range(10_000):
        cur["a"] = {}
        cur = cur["a"]
    h.err(h.call("read", nested_obj), "invalid_arguments")


def test_result_json_round_trips_weird_unicode(h: Any) -> None:
    name = "ünï\u202ecode😀.txt"
    res = h.ok(h.write(h.root / name, "line\u2028two\x1b[0m\n"))
    dumped = res.model_dump_json()
    assert json.loads(dumped)["details"]["path"].endswith(name)
    read = h.ok(h.read(h.root / name))
    assert "\u2028" in read.content


@pytest.mark.parametrize("tool", list(ALL_TOOLS.values()), ids=list(ALL_TOOLS))
def test_each_tool_exports_a_json_schema_matching_its_arguments(tool: Tool) -> None:
    spec = tool.spec()
    params = spec["function"]["parameters"]
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert set(params["properties"]) == set(tool.args_model.model_fields)
    required = {f for f, i in tool.args_model.model_fields.items() if i.is_required()}
    assert set(params.get("required", [])) == required
    assert spec["function"]["description"] == tool.description
    json.dumps(spec)


# -- regressions found by the hostile-input tests above -----------------------


@pytest.mark.parametrize("name", ["read", "write", "edit", "glob"])
def test_regression_name_too_long_was_internal_error(h: Any, name: str) -> None:
    long_name = str(h.root / ("x" * 300))
    args = {"read": {"path": long_name}, "write": {"path": long_name, "content": "x"},
            "edit": {"path": long_name, "old_string": "", "new_string": "x"},
            "glob": {"pattern": "*", "path": long_name}}[name]
    res = h.err(h.call(name, args), "name_too_long")
    assert "300 bytes" in res.content and "255" in res.content
    assert len(res.content) < 600


def test_regression_path_too_long_was_internal_error_and_echoed_whole(h: Any) -> None:
    res = h.err(h.read(str(h.root) + "/a" * 3000), "path_too_long")
    assert "4095" in res.content and "[...]" in res.content
    assert len(res.content) < 600


def test_regression_relative_path_error_echoed_a_megabyte(h: Any) -> None:
    res = h.err(h.read("a/" * 2000), "relative_path")
    assert len(res.content) < 1000
    h.err(h.read("a" * 1_000_000), "path_too_long")
    res = h.err(h.read("src/app.py"), "relative_path")
    assert f"{h.root}/src/app.py" in res.content


def test_regression_lone_surrogate_in_path_was_internal_error(h: Any) -> None:
    res = h.err(h.read(str(h.root) + "/\ud800.txt"), "invalid_path")
    assert "surrogate" in res.content


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_regression_lone_surrogate_in_new_file_content_was_internal_error(h: Any, tool: str) -> None:
    target = h.root / "new.txt"
    res = (h.write(target, "a\ud800b") if tool == "write" else h.edit(target, "", "a\ud800b"))
    h.err(res, "encoding_error")
    assert not target.exists()


def test_regression_result_with_lone_surrogate_could_not_be_serialised(h: Any) -> None:
    # A file name that is not UTF-8 comes back from os with a surrogate escape.
    os.mkdir(h.root / "d")
    with open(os.path.join(os.fsencode(h.root / "d"), b"caf\xe9.txt"), "wb") as fh:
        fh.write(b"x\n")
    res = h.ok(h.glob("d/*"))
    assert json.loads(res.model_dump_json())["content"] == f"{h.root}/d/caf\ufffd.txt"
    res = h.ok(h.glob("\ud800"))
    json.loads(res.model_dump_json())


def test_regression_deeply_nested_argument_crashed_the_error_message(h: Any) -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    res = h.err(h.call("read", {"path": deep}), "invalid_arguments")
    assert "`path` must be a string; got array" in res.content
