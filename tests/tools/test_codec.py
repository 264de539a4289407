"""One codec for a file: charset, BOM and line endings decided together (issue 11).

In a file whose line endings are uniformly CRLF (or CR), a \\n in old_string or
new_string means that line ending and the file keeps it; a file with mixed
endings is matched byte for byte, with the old diagnosis.  Whitespace and
indentation still match exactly: this is decoding, not fuzzy matching.
"""

from __future__ import annotations

import codecs

from tests.tools.conftest import Harness


def test_regression_lf_old_string_matches_a_crlf_file(h: Harness) -> None:
    """What read shows (lines without \\r) is what the model copies: it now matches."""
    target = h.read_new(b"def f():\r\n    return 1\r\n\r\nx = 2\r\n")
    res = h.ok(h.edit(target, "def f():\n    return 1\n", "def f():\n    return 2\n"))
    assert target.read_bytes() == b"def f():\r\n    return 2\r\n\r\nx = 2\r\n"
    assert "\r" not in res.content


def test_explicit_crlf_in_old_string_still_matches(h: Harness) -> None:
    target = h.read_new(b"a\r\nb\r\n")
    h.ok(h.edit(target, "a\r\nb", "A\nB"))
    assert target.read_bytes() == b"A\r\nB\r\n"


def test_whitespace_is_still_exact_in_a_crlf_file(h: Harness) -> None:
    target = h.read_new(b"if x:\r\n\treturn 1\r\n")
    res = h.err(h.edit(target, "if x:\n    return 1", "y"), "no_match")
    assert "tabs" in res.content and target.read_bytes() == b"if x:\r\n\treturn 1\r\n"


def test_crlf_precheck_agrees_with_the_run(h: Harness) -> None:
    target = h.read_new(b"one\r\ntwo\r\n")
    args = {"path": str(target), "old_string": "one\ntwo", "new_string": "1\n2"}
    assert h.tools["edit"].precheck(args, h.ctx) is None
    h.ok(h.call("edit", args))
    assert target.read_bytes() == b"1\r\n2\r\n"


def test_mixed_endings_stay_byte_exact_with_the_diagnosis(h: Harness) -> None:
    data = b"a = 1\r\nb = 2\nc = 3\r\n"
    target = h.read_new(data)
    res = h.err(h.edit(target, "a = 1\nb = 2", "x"), "no_match")
    assert "line endings differ: the file uses CRLF" in res.content
    assert target.read_bytes() == data
    h.ok(h.edit(target, "a = 1\r\nb = 2\n", "A\n"))  # byte-exact works, and LF stays LF
    assert target.read_bytes() == b"A\nc = 3\r\n"


def test_cr_only_file_is_read_in_lines_and_edited_in_cr(h: Harness) -> None:
    target = h.root / "mac.txt"
    target.write_bytes(b"first\rsecond\rthird\r")
    res = h.ok(h.read(target))
    assert res.content.split("\n")[:3] == ["     1\tfirst", "     2\tsecond", "     3\tthird"]
    assert res.details["line_ending"] == "CR" and res.details["total_lines"] == 3
    assert "CR line endings" in res.content
    res = h.ok(h.edit(target, "second\n", "2a\n2b\n"))
    assert target.read_bytes() == b"first\r2a\r2b\rthird\r"
    assert "line 2" in res.content and "     3\t2b" in res.content
    h.ok(h.read(target))
    h.ok(h.write(target, "x\ny\n"))
    assert target.read_bytes() == b"x\ry\r"


def test_cr_only_file_paged_with_offset_on_both_read_paths(h: Harness) -> None:
    import tools.read

    target = h.root / "mac.txt"
    target.write_bytes(b"".join(b"line %d\r" % i for i in range(1, 101)))
    for whole in (1 << 22, 0):
        tools.read._WHOLE_FILE_BYTES = whole
        try:
            res = h.ok(h.read(target, offset=50, limit=2))
        finally:
            tools.read._WHOLE_FILE_BYTES = 4 << 20
        assert res.content.split("\n")[:2] == ["    50\tline 50", "    51\tline 51"]


def test_bom_and_crlf_together(h: Harness) -> None:
    data = codecs.BOM_UTF8 + "naïve\r\ncafé\r\n".encode()
    target = h.read_new(data)
    h.ok(h.edit(target, "naïve\ncafé\n", "thé\nvert\n"))
    assert target.read_bytes() == codecs.BOM_UTF8 + "thé\r\nvert\r\n".encode()


def test_utf16_with_crlf(h: Harness) -> None:
    data = codecs.BOM_UTF16_LE + "one\r\ntwo\r\n".encode("utf-16-le")
    target = h.read_new(data)
    h.ok(h.edit(target, "one\ntwo", "1\n2"))
    assert target.read_bytes() == codecs.BOM_UTF16_LE + "1\r\n2\r\n".encode("utf-16-le")


def test_write_over_a_crlf_file_keeps_crlf(h: Harness) -> None:
    target = h.read_new(b"a\r\nb\r\n")
    res = h.ok(h.write(target, "x\ny\n"))
    assert target.read_bytes() == b"x\r\ny\r\n" and "CRLF" in res.content
