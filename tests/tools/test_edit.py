"""edit (§4): byte-exact replacement of text the session has read, with errors that
say how to recover, and the file's encoding and line endings kept."""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
from typing import Any

import pytest

# -- the happy path -----------------------------------------------------------


def test_replaces_exactly_the_matched_bytes(h: Any) -> None:
    target = h.read_new(b"def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    res = h.ok(h.edit(target, "    return 2", "    return 3"))
    assert target.read_bytes() == b"def f():\n    return 1\n\n\ndef g():\n    return 3\n"
    assert res.details["replacements"] == 1 and res.details["lines"] == [6]
    assert res.details["created"] is False and res.details["changed"] is True


def test_success_shows_the_changed_region_with_line_numbers(h: Any) -> None:
    target = h.read_new("".join(f"l{i}\n" for i in range(1, 21)).encode())
    res = h.ok(h.edit(target, "l10\n", "ten\nTEN\n"))
    head, *snippet = res.content.split("\n")
    assert head == f"Edited {target}: replaced 1 occurrence (line 10)."
    assert snippet == ["     7\tl7", "     8\tl8", "     9\tl9", "    10\tten", "    11\tTEN",
                       "    12\tl11", "    13\tl12", "    14\tl13"]
    assert "-l10" in res.details["diff"] and "+ten" in res.details["diff"]


def test_snippet_at_the_start_and_end_of_file(h: Any) -> None:
    target = h.read_new(b"a\nb\nc")
    res = h.ok(h.edit(target, "a", "A"))
    assert res.content.split("\n")[1:] == ["     1\tA", "     2\tb", "     3\tc"]
    res = h.ok(h.edit(target, "c", "C"))
    assert res.content.split("\n")[-1] == "     3\tC"
    assert target.read_bytes() == b"A\nb\nC"


def test_chained_edits_need_no_re_read(h: Any) -> None:
    target = h.read_new(b"x = 1\n")
    h.ok(h.edit(target, "1", "2"))
    h.ok(h.edit(target, "2", "3"))
    assert target.read_bytes() == b"x = 3\n"
    assert h.ledger.seen_hash(str(target)) == hashlib.sha256(b"x = 3\n").hexdigest()


def test_edit_can_delete_text(h: Any) -> None:
    target = h.read_new(b"keep\ndrop me\nkeep\n")
    h.ok(h.edit(target, "drop me\n", ""))
    assert target.read_bytes() == b"keep\nkeep\n"


# -- never normalized ---------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "old"),
    [
        (b"    indented\n", "indented  "),
        (b"x = 1\n", "x = 1 "),
        (b"x = 1\n", "x  = 1"),
        (b"\tif x:\n", "    if x:"),
        (b"caf\xc3\xa9\n", "cafe\u0301"),  # NFC in file, NFD given: not normalized
        (b"Hello\n", "hello"),
    ],
)
def test_match_is_byte_exact(h: Any, data: bytes, old: str) -> None:
    target = h.read_new(data)
    h.err(h.edit(target, old, "X"), "no_match")
    assert target.read_bytes() == data


def test_leading_whitespace_is_part_of_the_match(h: Any) -> None:
    target = h.read_new(b"x\n  x\n")
    h.ok(h.edit(target, "  x", "  y"))
    assert target.read_bytes() == b"x\n  y\n"


# -- seen and unchanged -------------------------------------------------------


def test_requires_a_prior_read(h: Any) -> None:
    (h.root / "f.txt").write_text("a\n")
    res = h.err(h.edit(h.root / "f.txt", "a", "b"), "not_read")
    assert "Read it first" in res.content
    assert (h.root / "f.txt").read_text() == "a\n"


def test_refused_when_the_file_changed_since_the_read(h: Any) -> None:
    target = h.read_new(b"a\n")
    target.write_bytes(b"a\nuser line\n")
    res = h.err(h.edit(target, "a", "b"), "file_changed")
    assert "Read it again" in res.content
    assert target.read_bytes() == b"a\nuser line\n"


# -- several matches ----------------------------------------------------------


def test_several_matches_without_replace_all_lists_count_and_every_line(h: Any) -> None:
    data = b"foo\nbar\nbar\nfoo\nbaz\nx foo y\n"
    target = h.read_new(data)
    res = h.err(h.edit(target, "foo", "qux"), "ambiguous_match")
    assert "occurs 3 times" in res.content and "lines 1, 4, 6" in res.content
    assert "replace_all" in res.content and "nothing was changed" in res.content
    assert res.details == {"count": 3, "lines": [1, 4, 6]}
    assert target.read_bytes() == data


def test_many_matches_list_fifty_lines_in_text_and_all_in_details(h: Any) -> None:
    target = h.read_new(b"hit\n" * 120)
    res = h.err(h.edit(target, "hit", "x"), "ambiguous_match")
    assert "occurs 120 times" in res.content and "and 70 more" in res.content
    assert res.details["lines"] == list(range(1, 121))


def test_replace_all_changes_every_occurrence(h: Any) -> None:
    target = h.read_new(b"a foo\nb\nfoo c\nfoo\nfoo\n")
    res = h.ok(h.edit(target, "foo", "bar", replace_all=True))
    assert target.read_bytes() == b"a bar\nb\nbar c\nbar\nbar\n"
    assert res.details["replacements"] == 4 and res.details["lines"] == [1, 3, 4, 5]
    assert "replaced 4 occurrences (lines 1, 3, 4, 5)" in res.content
    assert "[1 more replacement(s) not shown]" in res.content


def test_replace_all_with_a_single_match_and_with_growing_text(h: Any) -> None:
    target = h.read_new(b"aXa\n")
    h.ok(h.edit(target, "a", "aa", replace_all=True))
    assert target.read_bytes() == b"aaXaa\n"


def test_replace_all_with_no_match_is_no_match(h: Any) -> None:
    target = h.read_new(b"abc\n")
    h.err(h.edit(target, "zzz", "y", replace_all=True), "no_match")


# -- no match: the nearest candidate and the reason ---------------------------


def test_no_match_shows_nearest_candidate_with_lines(h: Any) -> None:
    target = h.read_new(b"import os\n\ndef handler(event):\n    return event['body']\n\nx = 1\n")
    res = h.err(h.edit(target, "def handler(evnt):\n    return evnt['body']", "x"), "no_match")
    assert "closest text is at lines 3-4" in res.content
    assert "     3\tdef handler(event):" in res.content
    assert "First difference: line 1 of old_string" in res.content
    assert res.details["candidate_line"] == 3


@pytest.mark.parametrize(
    ("data", "old", "reason"),
    [
        # mixed endings stay byte-exact, with the diagnosis (a uniform CRLF file matches)
        (b"a = 1\r\nb = 2\r\nc = 3\n", "a = 1\nb = 2", "the file uses CRLF"),
        (b"a = 1\nb = 2\n", "a = 1\r\nb = 2", "old_string uses CRLF"),
        (b"if x:\n\treturn 1\n", "if x:\n    return 1", "the file indents with tabs"),
        (b"if x:\n    return 1\n", "if x:\n\treturn 1", "the file indents with spaces"),
        (b"x = 1   \ny = 2\n", "x = 1\ny = 2", "trailing whitespace"),
        (b"    x = 1\n    y = 2\n", "  x = 1\n  y = 2", "indentation differs"),
        (codecs.BOM_UTF8 + b"first line\nsecond\n", "\ufefffirst line\nsecond", "byte-order mark"),
    ],
)
def test_no_match_explains_mechanical_differences(h: Any, data: bytes, old: str, reason: str) -> None:
    target = h.read_new(data)
    res = h.err(h.edit(target, old, "NEW"), "no_match")
    assert reason in res.content and reason in res.details["reason"]
    assert "lines 1-2" in res.content
    assert target.read_bytes() == data


def test_no_match_shows_tabs_and_carriage_returns_visibly(h: Any) -> None:
    target = h.read_new(b"\tx = 1\r\ny\n")  # mixed endings: the CR is shown
    res = h.err(h.edit(target, "    x = 1\n", "y"), "no_match")
    assert "→x = 1␍" in res.content


def test_no_match_with_nothing_similar_says_to_read_again(h: Any) -> None:
    target = h.read_new(b"alpha\nbeta\n")
    res = h.err(h.edit(target, "completely unrelated sentence here", "x"), "no_match")
    assert "No similar text" in res.content and "Read the file again" in res.content


def test_no_match_in_a_file_too_large_to_search_points_to_grep(h: Any) -> None:
    target = h.read_new(b"x" * 2000 + b"\n")
    small = h.with_settings(fuzzy_max_file_bytes=100)
    res = small.err(small.edit(target, "y", "z"), "no_match")
    assert "too large to search" in res.content and "grep" in res.content


def test_no_match_on_invalid_byte_explains_replacement_character(h: Any) -> None:
    target = h.read_new("héllo\n".encode() + b"bad \xff here\n")
    res = h.err(h.edit(target, "héllo\nbad \ufffd here", "x"), "no_match")
    assert "U+FFFD" in res.content


def test_old_string_the_encoding_cannot_hold_is_no_match(h: Any) -> None:
    target = h.read_new("café\n".encode("latin-1"))
    h.err(h.edit(target, "☃", "x"), "no_match")
    assert target.read_bytes() == "café\n".encode("latin-1")


# -- argument-level errors ----------------------------------------------------


def test_identical_old_and_new_is_an_error(h: Any) -> None:
    target = h.read_new(b"a\n")
    res = h.err(h.edit(target, "a", "a"), "no_change")
    assert "identical" in res.content
    h.err(h.edit(h.root / "missing.txt", "", ""), "no_change")
    assert target.read_bytes() == b"a\n" and not (h.root / "missing.txt").exists()


def test_empty_old_string_creates_a_new_file(h: Any) -> None:
    res = h.ok(h.edit(h.root / "new.txt", "", "hello\n"))
    assert (h.root / "new.txt").read_bytes() == b"hello\n"
    assert res.details["created"] is True and f"Created {h.root}/new.txt" in res.content
    assert stat.S_IMODE(os.stat(h.root / "new.txt").st_mode) == 0o644
    h.ok(h.edit(h.root / "new.txt", "hello", "bye"))  # recorded as seen


def test_empty_old_string_on_an_existing_file_is_an_error(h: Any) -> None:
    target = h.read_new(b"content\n")
    res = h.err(h.edit(target, "", "x"), "file_exists")
    assert "use write" in res.content
    assert target.read_bytes() == b"content\n"
    (h.root / "unread.txt").write_text("u\n")
    h.err(h.edit(h.root / "unread.txt", "", "x"), "file_exists")


def test_missing_file_with_old_string_suggests_near_names(h: Any) -> None:
    (h.root / "handler.py").write_text("x\n")
    res = h.err(h.edit(h.root / "handlr.py", "x", "y"), "not_found")
    assert f"{h.root}/handler.py" in res.content


def test_empty_old_string_respects_missing_parent_rule(h: Any) -> None:
    h.err(h.edit(h.root / "no" / "new.txt", "", "x"), "parent_not_found")
    op = h.with_settings(create_parent_dirs=True)
    op.ok(op.edit(h.root / "no" / "new.txt", "", "x"))


# -- atomic, mode, encodings --------------------------------------------------


def test_edit_is_atomic_and_keeps_mode(h: Any) -> None:
    target = h.read_new(b"#!/bin/sh\necho a\n", "run.sh")
    os.chmod(target, 0o750)
    ino = os.stat(target).st_ino
    h.ok(h.edit(target, "echo a", "echo b"))
    assert os.stat(target).st_ino != ino  # replaced by rename, never rewritten in place
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o750
    assert os.listdir(h.root) == ["run.sh"]


def test_crlf_file_keeps_crlf(h: Any) -> None:
    target = h.read_new(b"one\r\ntwo\r\nthree\r\n")
    res = h.ok(h.edit(target, "two", "2a\n2b"))
    assert target.read_bytes() == b"one\r\n2a\r\n2b\r\nthree\r\n"
    assert res.details["crlf_converted"] is True and "CRLF" in res.content
    h.ok(h.edit(target, "2a\r\n2b\r\n", "two\r\n"))
    assert target.read_bytes() == b"one\r\ntwo\r\nthree\r\n"


def test_mixed_endings_file_is_left_mixed(h: Any) -> None:
    target = h.read_new(b"a\r\nb\nc\r\n")
    h.ok(h.edit(target, "b", "x\ny"))
    assert target.read_bytes() == b"a\r\nx\ny\nc\r\n"


def test_bom_is_kept(h: Any) -> None:
    target = h.read_new(codecs.BOM_UTF8 + "ünïcode\nline\n".encode())
    h.ok(h.edit(target, "ünïcode", "text"))
    assert target.read_bytes() == codecs.BOM_UTF8 + b"text\nline\n"


def test_latin1_file_is_edited_in_latin1(h: Any) -> None:
    target = h.read_new("café\nnaïve\n".encode("latin-1"))
    h.ok(h.edit(target, "naïve", "señor"))
    assert target.read_bytes() == "café\nseñor\n".encode("latin-1")


def test_new_text_the_encoding_cannot_hold_is_refused(h: Any) -> None:
    data = "café\n".encode("latin-1")
    target = h.read_new(data)
    res = h.err(h.edit(target, "café", "☕"), "encoding_error")
    assert "latin-1" in res.content
    assert target.read_bytes() == data


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_files_keep_their_encoding(h: Any, codec: str) -> None:
    bom = codecs.BOM_UTF16_BE if codec == "utf-16-be" else b""
    target = h.read_new(bom + "naïve\r\ncafé\r\n".encode(codec))
    h.ok(h.edit(target, "café", "thé\nvert"))
    expected = bom + "naïve\r\nthé\r\nvert\r\n".encode(codec)
    assert target.read_bytes() == expected


def test_invalid_utf8_bytes_elsewhere_are_kept(h: Any) -> None:
    data = "héllo\n".encode() + b"\xff\xfe raw\n" + b"target line\n" + b"\x80 tail"
    target = h.read_new(data)
    h.ok(h.edit(target, "target line", "changed line"))
    assert target.read_bytes() == data.replace(b"target line", b"changed line")


def test_invalid_byte_inside_the_match_can_be_given_as_surrogate_escape(h: Any) -> None:
    data = "é\n".encode() + b"ab\xffcd\n"
    target = h.read_new(data)
    h.ok(h.edit(target, "ab\udcffcd", "fixed"))
    assert target.read_bytes() == "é\n".encode() + b"fixed\n"


def test_tabs_are_matched_and_kept(h: Any) -> None:
    target = h.read_new(b"all:\n\tcc x.c\n\techo done\n", "Makefile")
    h.ok(h.edit(target, "\tcc x.c", "\tcc -O2 x.c"))
    assert target.read_bytes() == b"all:\n\tcc -O2 x.c\n\techo done\n"


# -- regressions ----------------------------------------------------------------


def test_regression_snippet_showed_four_context_lines_after_a_match_ending_in_newline(h: Any) -> None:
    target = h.read_new("".join(f"l{i}\n" for i in range(1, 21)).encode())
    res = h.ok(h.edit(target, "l10\n", "X\n"))
    assert res.content.split("\n")[1:] == [f"{n:>6}\t{t}" for n, t in
                                           [(7, "l7"), (8, "l8"), (9, "l9"), (10, "X"),
                                            (11, "l11"), (12, "l12"), (13, "l13")]]


def test_regression_crlf_reason_was_reported_as_trailing_whitespace(h: Any) -> None:
    """The candidate kept the CR of its last line, which old_string never includes."""
    target = h.read_new(b"def f():\r\n    return 1\r\nz = 2\n")  # mixed endings
    res = h.err(h.edit(target, "def f():\n    return 1", "x"), "no_match")
    assert res.details["reason"].startswith("line endings differ: the file uses CRLF")


def test_regression_invalid_byte_reason_was_reported_as_crlf(h: Any) -> None:
    """old_string equal to the displayed text (U+FFFD for the bad byte) was blamed on CRLF."""
    target = h.read_new("é\n".encode() + b"bad \xff here\n")
    res = h.err(h.edit(target, "é\nbad \ufffd here", "x"), "no_match")
    assert "U+FFFD" in res.details["reason"] and "CRLF" not in res.content


@pytest.mark.parametrize(
    ("data", "old", "lines"),
    [(b"aaa\n", "aa", [1, 1]), (b"x\n----\n", "---", [2, 2]), (b"ab\nab\nab\n", "ab\nab", [1, 2]),
     (b"aaaaaa\n", "aaaa", [1, 1, 1])],
)
def test_regression_overlapping_occurrences_were_treated_as_unique(
    h: Any, data: bytes, old: str, lines: list[int]
) -> None:
    """str.find-style counting saw one match in "aaa" for "aa"; replacing it was a guess."""
    target = h.read_new(data)
    res = h.err(h.edit(target, old, "Z"), "ambiguous_match")
    assert res.details == {"count": len(lines), "lines": lines}
    assert target.read_bytes() == data
    h.ok(h.edit(target, old, "Z", replace_all=True))  # replace_all: non-overlapping, left to right
    assert target.read_bytes() == data.replace(old.encode(), b"Z")


def test_the_diff_and_the_preview_number_lines_as_the_file_does(h: Any) -> None:
    target = h.read_new("".join(f"l{i}\n" for i in range(1, 41)).encode())
    args = {"path": str(target), "old_string": "l30\n", "new_string": "thirty\n"}
    preview = h.tools["edit"].preview_of(args, h.ctx)
    assert preview is not None and "@@ -27,7 +27,7 @@" in preview and "-l30" in preview
    assert target.read_text().count("l30") == 1  # a preview changes nothing
    res = h.ok(h.edit(target, "l30\n", "thirty\n"))
    assert res.details["diff"] == preview
    assert h.tools["edit"].preview_of({"path": str(target), "old_string": "nope",
                                       "new_string": "x"}, h.ctx) is None  # hopeless: none
    assert h.tools["edit"].preview_of({"path": 7}, h.ctx) is None  # malformed: none
    new = h.tools["edit"].preview_of({"path": str(h.root / "new.txt"), "old_string": "",
                                      "new_string": "a\nb\n"}, h.ctx)
    assert new is not None and "+a\n+b\n" in new and "/dev/null" in new


def test_an_edit_of_the_last_line_shows_its_old_and_new_lines_apart(h: Any) -> None:
    """Seen in the TUI: the diff of an edit to a file's last line ran the removed line into the
    added one (`-    return t.lower()+    return t.lower().strip()`)."""
    target = h.read_new(b"def slug(t):\n    return t.lower()\n")
    res = h.ok(h.edit(target, "t.lower()", "t.lower().strip()"))
    body = res.details["diff"].splitlines()
    assert "-    return t.lower()" in body and "+    return t.lower().strip()" in body
