"""Tool.precheck: the error a hopeless call will certainly end with, without side effects.

Policy calls it before asking a human (issue 11: an edit of a file never read
was put to the approver).  Each case checks that the precheck's result is
exactly the one the real call gives, and that the precheck changed nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.tools.conftest import Harness
from tools import ToolResult


def _tree(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = None
        for f in filenames:
            full = os.path.join(dirpath, f)
            out[os.path.relpath(full, root)] = Path(full).read_bytes()
    return out


def _same_as_run(h: Harness, tool: str, args: Any, code: str) -> ToolResult:
    """Precheck finds ``code``, changes nothing, and the real call then fails identically."""
    before = _tree(h.root)
    pre = h.tools[tool].precheck(args, h.ctx)
    assert pre is not None, f"precheck found nothing; expected {code}"
    assert _tree(h.root) == before, "precheck changed the workspace"
    real = h.call(tool, args)
    assert not real.ok and real.error is not None and real.error.code == code, real.content
    assert pre.model_dump() == real.model_dump()
    return pre


def _would_succeed(h: Harness, tool: str, args: Any) -> None:
    before = _tree(h.root)
    assert h.tools[tool].precheck(args, h.ctx) is None
    assert _tree(h.root) == before, "precheck changed the workspace"
    assert h.call(tool, args).ok


@pytest.mark.parametrize("tool", ["read", "write", "edit", "glob", "grep", "bash"])
def test_schema_errors_are_found_for_every_tool(h: Harness, tool: str) -> None:
    _same_as_run(h, tool, {"no_such_field": 1}, "invalid_arguments")
    _same_as_run(h, tool, ["not", "an", "object"], "invalid_arguments")


@pytest.mark.parametrize("tool", ["read", "write", "edit"])
def test_relative_and_outside_paths(h: Harness, tool: str) -> None:
    extra: dict[str, Any] = {"write": {"content": "x"}, "edit": {"old_string": "a", "new_string": "b"},
                             "read": {}}[tool]
    _same_as_run(h, tool, {"path": "src/x.py", **extra}, "relative_path")
    _same_as_run(h, tool, {"path": "/etc/passwd", **extra}, "outside_workspace")
    _same_as_run(h, tool, {"path": str(h.root / ".." / "elsewhere"), **extra}, "outside_workspace")


def test_edit_of_a_file_never_read(h: Harness) -> None:
    (h.root / "f.txt").write_text("alpha\nbeta\n")
    pre = _same_as_run(h, "edit", {"path": str(h.root / "f.txt"), "old_string": "alpha",
                                   "new_string": "ALPHA"}, "not_read")
    assert "Read it first" in pre.content


def test_write_over_a_file_never_read(h: Harness) -> None:
    (h.root / "f.txt").write_text("alpha\n")
    _same_as_run(h, "write", {"path": str(h.root / "f.txt"), "content": "new\n"}, "not_read")


def test_stale_file(h: Harness) -> None:
    f = h.root / "f.txt"
    f.write_text("alpha\n")
    h.ok(h.read(f))
    f.write_text("changed behind our back\n")
    _same_as_run(h, "edit", {"path": str(f), "old_string": "alpha", "new_string": "A"}, "file_changed")
    _same_as_run(h, "write", {"path": str(f), "content": "x"}, "file_changed")


def test_no_match_and_not_unique(h: Harness) -> None:
    f = h.root / "f.txt"
    f.write_text("one\ntwo\none\n")
    h.ok(h.read(f))
    pre = _same_as_run(h, "edit", {"path": str(f), "old_string": "three", "new_string": "3"},
                       "no_match")
    assert "nothing was changed" in pre.content
    pre = _same_as_run(h, "edit", {"path": str(f), "old_string": "one", "new_string": "1"},
                       "ambiguous_match")
    assert pre.error is not None and "lines 1, 3" in pre.content


def test_identical_strings_and_existing_file_with_empty_old(h: Harness) -> None:
    f = h.root / "f.txt"
    f.write_text("one\n")
    _same_as_run(h, "edit", {"path": str(f), "old_string": "x", "new_string": "x"}, "no_change")
    _same_as_run(h, "edit", {"path": str(f), "old_string": "", "new_string": "x"}, "file_exists")


def test_missing_file_and_directory(h: Harness) -> None:
    (h.root / "d").mkdir()
    _same_as_run(h, "read", {"path": str(h.root / "nope.txt")}, "not_found")
    _same_as_run(h, "read", {"path": str(h.root / "d")}, "is_directory")
    _same_as_run(h, "edit", {"path": str(h.root / "nope.txt"), "old_string": "a",
                             "new_string": "b"}, "not_found")
    _same_as_run(h, "write", {"path": str(h.root / "d"), "content": "x"}, "is_directory")


def test_binary_file(h: Harness) -> None:
    (h.root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    _same_as_run(h, "read", {"path": str(h.root / "img.png")}, "binary_file")


def test_missing_parents_are_not_created_by_the_precheck(h: Harness) -> None:
    op = h.with_settings(create_parent_dirs=True)
    target = h.root / "new" / "deep" / "f.txt"
    # edit of existing text in a missing directory: never creates the directories
    _same_as_run(op, "edit", {"path": str(target), "old_string": "a", "new_string": "b"},
                 "parent_not_found")
    assert not (h.root / "new").exists()
    _same_as_run(h, "write", {"path": str(target), "content": "x"}, "parent_not_found")
    # allowed by the operator: the precheck finds nothing and creates nothing; the run creates
    _would_succeed(op, "write", {"path": str(target), "content": "x"})
    assert target.read_text() == "x"


def test_calls_that_would_succeed_pass_unchanged(h: Harness) -> None:
    f = h.root / "f.txt"
    f.write_text("alpha\nbeta\n")
    _would_succeed(h, "read", {"path": str(f)})
    _would_succeed(h, "edit", {"path": str(f), "old_string": "alpha", "new_string": "ALPHA"})
    h.ok(h.read(f))
    _would_succeed(h, "write", {"path": str(f), "content": "whole\n"})
    _would_succeed(h, "edit", {"path": str(h.root / "new.txt"), "old_string": "", "new_string": "n"})
    _would_succeed(h, "glob", {"pattern": "*.txt"})


def test_secret_paths_are_refused_alike(h: Harness) -> None:
    (h.root / ".env").write_text("TOKEN=1\n")
    _same_as_run(h, "read", {"path": str(h.root / ".env")}, "secret_path")


def test_encoding_error_in_new_content(h: Harness) -> None:
    f = h.root / "latin.txt"
    f.write_bytes(b"caf\xe9\n")
    h.ok(h.read(f))
    _same_as_run(h, "edit", {"path": str(f), "old_string": "caf", "new_string": "\u4e2d"},
                 "encoding_error")
    _same_as_run(h, "write", {"path": str(f), "content": "\u4e2d"}, "encoding_error")


def test_oversized_content(h: Harness) -> None:
    small = h.with_settings(edit_max_file_bytes=10)
    _same_as_run(small, "write", {"path": str(h.root / "big.txt"), "content": "x" * 100}, "too_large")


def test_precheck_never_raises_on_hostile_input(h: Harness) -> None:
    hostile: list[Any] = [None, 0, "", {"path": None}, {"path": "\x00"}, {"path": "/" * 10000},
                          {"path": "\ud800"}, {"path": str(h.root), "old_string": "a" * 100_000,
                                               "new_string": "b"}]
    for tool in ("read", "write", "edit"):
        for args in hostile:
            pre = h.tools[tool].precheck(args, h.ctx)
            assert pre is None or (not pre.ok and pre.error is not None)
