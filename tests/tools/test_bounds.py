"""Bounded means bounded (issue 11): read, edit and grep cap what one call returns.

Tried before the fix: a default read of a file of long lines returned 4 MB (2,000
lines x 2,000 characters), `limit: 3000` 6 MB; edit echoed a 100 KB new_string
whole with truncated false; grep's 50-lines-per-file cap ignored context lines.
"""

from __future__ import annotations

from typing import Any

from tests.tools.conftest import Harness


def test_regression_read_of_long_lines_is_capped_in_characters(h: Harness) -> None:
    f = h.root / "wide.txt"
    f.write_text("".join(f"{i:05d}" + "x" * 1995 + "\n" for i in range(1, 2501)))
    res = h.ok(h.read(f))
    assert len(res.content) <= 100_000 + 300
    assert res.truncated and res.details["output_capped"] is True
    last = res.content.split("\n")[-1]
    end = res.details["end_line"]
    assert last == (f"[truncated: showing lines 1-{end} of 2500; read returns at most 100000 "
                    f"characters per call. Use offset={end + 1} to read on.]")
    # paging on from the note continues exactly where the window stopped
    nxt = h.ok(h.read(f, offset=end + 1))
    assert nxt.content.startswith(f"{end + 1:>6}\t{end + 1:05d}")


def test_read_limit_has_a_maximum(h: Harness) -> None:
    f = h.root / "f.txt"
    f.write_text("a\n" * 10)
    res = h.err(h.read(f, limit=5001), "invalid_arguments")
    assert "5000" in res.content
    h.ok(h.read(f, limit=5000))


def test_read_of_short_lines_is_not_capped(h: Harness) -> None:
    f = h.root / "f.txt"
    f.write_text("short line\n" * 2000)
    res = h.ok(h.read(f))
    assert res.truncated is False and res.details["output_capped"] is False


def test_read_cap_always_shows_one_line(h: Harness) -> None:
    op = h.with_settings(read_max_output_chars=4000, read_max_line_chars=6000)
    f = h.root / "f.txt"
    f.write_text("y" * 5000 + "\n" + "z\n")
    res = op.ok(op.read(f))
    assert res.details["end_line"] == 1 and "offset=2" in res.content


def test_regression_edit_snippet_of_a_huge_new_string_is_bounded(h: Harness) -> None:
    f = h.root / "f.py"
    f.write_text("start\nMARK\nend\n")
    h.ok(h.read(f))
    new = "".join(f"line {i} " + "z" * 90 + "\n" for i in range(1000))  # ~100 KB
    res = h.ok(h.edit(f, "MARK\n", new))
    assert len(res.content) < 40 * 600
    assert res.truncated is True
    assert "lines not shown; read the file with offset" in res.content
    assert f.read_text() == "start\n" + new + "end\n"  # the file has all of it
    assert len(res.details["diff"]) <= 64 * 1024 + 40


def test_edit_snippet_cuts_a_long_line(h: Harness) -> None:
    f = h.root / "f.txt"
    f.write_text("a\nb\n")
    h.ok(h.read(f))
    res = h.ok(h.edit(f, "b", "q" * 100_000))
    assert res.truncated is True and "[...line truncated]" in res.content
    assert len(res.content) < 2000


def test_small_edit_is_not_truncated(h: Harness) -> None:
    f = h.root / "f.txt"
    f.write_text("a\nb\n")
    h.ok(h.read(f))
    assert h.ok(h.edit(f, "b", "c")).truncated is False


def _grep(h: Harness, **args: Any) -> Any:
    return h.call("grep", args)


def test_regression_grep_per_file_cap_counts_context_lines(h: Harness) -> None:
    f = h.root / "many.txt"
    f.write_text("".join(("hit\n" if i % 10 == 0 else "filler\n") for i in range(2000)))
    res = h.ok(_grep(h, pattern="hit", path=str(h.root), output_mode="content", context=20))
    printed = [ln for ln in res.content.split("\n") if ln.startswith(str(f))]
    assert 0 < len(printed) <= 50
    assert res.truncated is True and "more matching lines after line" in res.content
    no_context = h.ok(_grep(h, pattern="hit", path=str(h.root), output_mode="content"))
    assert len([ln for ln in no_context.content.split("\n") if ln.startswith(str(f))]) == 50
