"""read (§2): numbered lines, bounded output, binary refusal, encodings, file state."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import os
import subprocess
import zipfile
from typing import Any

import pytest

import tools.read

NOTE = "[truncated: showing lines {a}-{b} of {n}. Use offset/limit to read more.]"


@pytest.fixture(autouse=True, params=["whole", "stream"])
def read_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run every test on both code paths: small files decoded whole, large ones streamed."""
    if request.param == "stream":
        monkeypatch.setattr(tools.read, "_WHOLE_FILE_BYTES", 0)
    return str(request.param)


def _lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


# -- format -------------------------------------------------------------------


def test_output_is_exactly_cat_n(h: Any) -> None:
    text = "first\n\tindented with tab\n  two spaces\n\nlast without newline"
    (h.root / "f.txt").write_text(text)
    res = h.ok(h.read(h.root / "f.txt"))
    cat = subprocess.run(["cat", "-n", str(h.root / "f.txt")], capture_output=True, text=True,
                         check=True).stdout
    assert res.content == cat
    assert res.content.splitlines()[1] == "     2\t\tindented with tab"
    assert res.truncated is False
    assert res.details["total_lines"] == 5 and res.details["start_line"] == 1
    assert res.details["end_line"] == 5


def test_line_numbers_widen_past_six_digits(h: Any) -> None:
    (h.root / "f.txt").write_text(_lines(1_000_001))
    res = h.ok(h.read(h.root / "f.txt", offset=999_999, limit=3))
    assert res.content.splitlines()[:3] == [
        "999999\tline 999999", "1000000\tline 1000000", "1000001\tline 1000001"]


# -- limits and paging --------------------------------------------------------


def test_default_limit_is_2000_lines_with_the_exact_note(h: Any) -> None:
    (h.root / "big.txt").write_text(_lines(8431))
    res = h.ok(h.read(h.root / "big.txt"))
    body = res.content.split("\n")
    assert body[0] == "     1\tline 1"
    assert body[1999] == "  2000\tline 2000"
    assert body[2000] == "[truncated: showing lines 1-2000 of 8431. Use offset/limit to read more.]"
    assert len(body) == 2001
    assert res.truncated is True
    assert res.details["end_line"] == 2000 and res.details["total_lines"] == 8431


def test_exactly_2000_lines_is_not_truncated(h: Any) -> None:
    (h.root / "f.txt").write_text(_lines(2000))
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.truncated is False and "[truncated" not in res.content
    assert res.content.count("\n") == 1999


def test_offset_and_limit_select_a_window(h: Any) -> None:
    (h.root / "f.txt").write_text(_lines(100))
    res = h.ok(h.read(h.root / "f.txt", offset=10, limit=5))
    assert res.content == "\n".join(f"{i:>6}\tline {i}" for i in range(10, 15)) + "\n" + NOTE.format(
        a=10, b=14, n=100)
    assert res.truncated is True


def test_window_reaching_the_end_has_no_note(h: Any) -> None:
    (h.root / "f.txt").write_text(_lines(100))
    res = h.ok(h.read(h.root / "f.txt", offset=98, limit=50))
    assert res.content == "    98\tline 98\n    99\tline 99\n   100\tline 100"
    assert res.truncated is False


def test_offset_alone_pages_2000_lines_from_there(h: Any) -> None:
    (h.root / "f.txt").write_text(_lines(5000))
    res = h.ok(h.read(h.root / "f.txt", offset=2001))
    assert res.content.endswith(NOTE.format(a=2001, b=4000, n=5000))


def test_operator_can_lower_the_default_limit(h: Any) -> None:
    (h.root / "f.txt").write_text(_lines(10))
    res = h.ok(h.with_settings(read_default_limit_lines=3).read(h.root / "f.txt"))
    assert res.content.endswith(NOTE.format(a=1, b=3, n=10))


@pytest.mark.parametrize("offset", [11, 12, 10**9])
def test_offset_past_the_end_is_an_error_naming_the_length(h: Any, offset: int) -> None:
    (h.root / "f.txt").write_text(_lines(10))
    res = h.err(h.read(h.root / "f.txt", offset=offset), "offset_out_of_range")
    assert f"offset {offset}" in res.content and "has 10 lines" in res.content
    assert "between 1 and 10" in res.content


def test_last_line_without_newline_is_counted(h: Any) -> None:
    (h.root / "f.txt").write_text("a\nb")
    res = h.ok(h.read(h.root / "f.txt", offset=2))
    assert res.content == "     2\tb"


# -- long lines ---------------------------------------------------------------


def test_lines_over_2000_chars_are_cut_individually(h: Any) -> None:
    (h.root / "f.txt").write_text("short\n" + "x" * 2000 + "\n" + "y" * 2001 + "\n" + "é" * 5000 + "\nend\n")
    res = h.ok(h.read(h.root / "f.txt"))
    lines = res.content.split("\n")
    assert lines[0] == "     1\tshort"
    assert lines[1] == "     2\t" + "x" * 2000  # exactly 2000 stays whole
    assert lines[2] == "     3\t" + "y" * 2000 + "[...line truncated]"
    assert lines[3] == "     4\t" + "é" * 2000 + "[...line truncated]"  # characters, not bytes
    assert lines[4] == "     5\tend"
    assert res.truncated is True
    assert res.details["long_lines_cut"] == [3, 4]


def test_a_huge_single_line_is_cut_and_paging_continues_after_it(h: Any) -> None:
    (h.root / "f.txt").write_text("a\n" + "z" * 3_000_000 + "\nb\n")
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content.split("\n") == ["     1\ta", "     2\t" + "z" * 2000 + "[...line truncated]",
                                       "     3\tb"]
    assert h.ok(h.read(h.root / "f.txt", offset=3)).content == "     3\tb"
    assert len(h.ok(h.read(h.root / "f.txt", offset=2, limit=1)).content) < 2100


def test_a_huge_last_line_without_newline(h: Any) -> None:
    (h.root / "f.txt").write_text("a\n" + "q" * 10_000)
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content.endswith("q" * 2000 + "[...line truncated]")
    assert res.details["total_lines"] == 2


# -- binary -------------------------------------------------------------------


def _elf() -> bytes:
    with open("/bin/true", "rb") as fh:
        return fh.read(4096)


BINARIES = {
    "image.png": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(50), "PNG image"),
    "photo.jpg": (b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(50), "JPEG image"),
    "doc.pdf": (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + bytes(20), "PDF document"),
    "prog": (_elf(), "ELF"),
    "data.gz": (gzip.compress(b"hello world\n" * 100), "gzip"),
    "blob.bin": (b"abc\x00def\x00" * 10, "NUL bytes"),
    "db.sqlite": (b"SQLite format 3\x00" + bytes(100), "SQLite"),
}


@pytest.mark.parametrize("name", sorted(BINARIES))
def test_binary_files_are_refused_naming_their_type(h: Any, name: str) -> None:
    data, kind = BINARIES[name]
    (h.root / name).write_bytes(data)
    res = h.err(h.read(h.root / name), "binary_file")
    assert kind in res.content and kind in res.details["binary_kind"]
    assert f"{len(data)} bytes" in res.content
    assert "\x00" not in res.content and "IHDR" not in res.content


def test_zip_archive_is_refused(h: Any) -> None:
    with zipfile.ZipFile(h.root / "a.zip", "w") as z:
        z.writestr("x.txt", "hello")
    assert "ZIP archive" in h.err(h.read(h.root / "a.zip"), "binary_file").content


@pytest.mark.parametrize("text", ["MZ is how this note starts\n", "BM: bowel movement log\n",
                                  "ID3 tags explained\n"])
def test_text_starting_with_a_short_magic_is_still_text(h: Any, text: str) -> None:
    (h.root / "f.txt").write_text(text)
    assert text.strip() in h.ok(h.read(h.root / "f.txt")).content


def test_nul_after_the_first_8k_is_shown_not_refused(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"a" * 9000 + b"\n\x00tail\n")
    res = h.ok(h.read(h.root / "f.txt", offset=2))
    assert "tail" in res.content


# -- empty, missing, not a file -----------------------------------------------


def test_empty_file_says_so(h: Any) -> None:
    (h.root / "empty.txt").write_bytes(b"")
    res = h.ok(h.read(h.root / "empty.txt"))
    assert res.content == "[file exists but is empty]"
    assert res.details["file_state"]["sha256"] == hashlib.sha256(b"").hexdigest()
    assert h.ledger.seen_hash(str(h.root / "empty.txt")) == hashlib.sha256(b"").hexdigest()


def test_file_with_only_a_bom_is_empty(h: Any) -> None:
    (h.root / "bom.txt").write_bytes(codecs.BOM_UTF8)
    assert h.ok(h.read(h.root / "bom.txt")).content == "[file exists but is empty]"


def test_empty_file_with_offset_is_still_the_empty_marker(h: Any) -> None:
    (h.root / "empty.txt").write_bytes(b"")
    assert h.ok(h.read(h.root / "empty.txt", offset=5)).content == "[file exists but is empty]"


def test_missing_file_suggests_near_names_and_glob(h: Any) -> None:
    (h.root / "src").mkdir()
    (h.root / "src" / "config.py").write_text("x\n")
    res = h.err(h.read(h.root / "src" / "confg.py"), "not_found")
    assert f"File not found: {h.root}/src/confg.py." in res.content
    assert f"Did you mean {h.root}/src/config.py" in res.content
    assert "glob" in res.content and "'**/confg.py'" in res.content
    assert res.details["suggestions"][0] == f"{h.root}/src/config.py"


def test_missing_file_suggests_the_same_name_elsewhere(h: Any) -> None:
    (h.root / "lib" / "deep").mkdir(parents=True)
    (h.root / "lib" / "deep" / "utils.py").write_text("x\n")
    res = h.err(h.read(h.root / "utils.py"), "not_found")
    assert f"{h.root}/lib/deep/utils.py" in res.details["suggestions"]


def test_missing_file_with_nothing_similar_still_points_to_glob(h: Any) -> None:
    res = h.err(h.read(h.root / "nothing.txt"), "not_found")
    assert res.details["suggestions"] == [] and "Did you mean" not in res.content
    assert "Use glob" in res.content


def test_missing_directory_says_which_part_is_missing(h: Any) -> None:
    res = h.err(h.read(h.root / "no" / "such" / "f.txt"), "parent_not_found")
    assert f"Directory {h.root}/no does not exist" in res.content and "glob" in res.content


def test_file_used_as_a_directory(h: Any) -> None:
    (h.root / "f.txt").write_text("x\n")
    res = h.err(h.read(h.root / "f.txt" / "g"), "not_a_directory")
    assert "is a file, not a directory" in res.content


def test_directory_is_refused_pointing_to_glob(h: Any) -> None:
    (h.root / "src").mkdir()
    res = h.err(h.read(h.root / "src"), "is_directory")
    assert "Use glob" in res.content
    h.err(h.read(str(h.root)), "is_directory")


def test_fifo_is_refused_without_blocking(h: Any) -> None:
    os.mkfifo(h.root / "pipe")
    h.err(h.read(h.root / "pipe"), "not_a_regular_file")


# -- encodings and line endings -----------------------------------------------


def test_crlf_lines_are_shown_without_cr_and_noted(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content.startswith("     1\tone\n     2\ttwo\n     3\tthree\n")
    assert "\r" not in res.content and "CRLF" in res.content
    assert res.details["line_ending"] == "CRLF"


def test_mixed_line_endings_are_reported_as_lf(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"one\r\ntwo\nthree\r\n")
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content == "     1\tone\n     2\ttwo\n     3\tthree"
    assert res.details["line_ending"] == "LF"


def test_lone_cr_inside_a_line_is_kept(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"progress\r50%\rdone\n")
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content == "     1\tprogress\r50%\rdone"


def test_utf8_bom_is_not_shown(h: Any) -> None:
    (h.root / "f.txt").write_bytes(codecs.BOM_UTF8 + "héllo\nwörld\n".encode())
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content == "     1\théllo\n     2\twörld"
    assert res.details["encoding"] == "utf-8 with BOM"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_with_bom_are_decoded(h: Any, codec: str) -> None:
    text = "naïve\r\ncafé ☕\r\n"
    data = text.encode(codec)
    if codec == "utf-16-be":
        data = codecs.BOM_UTF16_BE + data
    (h.root / "f.txt").write_bytes(data)
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content.startswith("     1\tnaïve\n     2\tcafé ☕\n")
    assert res.details["line_ending"] == "CRLF"
    assert "with BOM" in res.details["encoding"]


def test_tabs_are_kept_verbatim(h: Any) -> None:
    (h.root / "Makefile").write_text("all:\n\tcc -o x x.c\n\t\techo\t'done'\n")
    res = h.ok(h.read(h.root / "Makefile"))
    assert res.content.split("\n")[1:] == ["     2\t\tcc -o x x.c", "     3\t\t\techo\t'done'"]


def test_latin1_file_is_decoded_as_latin1(h: Any) -> None:
    (h.root / "f.txt").write_bytes("café\nniño\n".encode("latin-1"))
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content == "     1\tcafé\n     2\tniño"
    assert res.details["encoding"] == "latin-1"


def test_invalid_utf8_is_shown_with_replacement_characters(h: Any) -> None:
    (h.root / "f.txt").write_bytes("héllo\n".encode() + b"bad \xff\xfe byte\n")
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content == "     1\théllo\n     2\tbad \ufffd\ufffd byte"
    assert res.details["encoding"] == "utf-8 (with invalid bytes)"
    res.model_dump_json()  # no lone surrogates leak into the result


def test_multibyte_character_split_across_the_read_chunk(h: Any) -> None:
    data = b"a" * ((1 << 20) - 1) + "é\n".encode() + b"z\n"
    (h.root / "f.txt").write_bytes(data)
    res = h.ok(h.read(h.root / "f.txt", offset=2))
    assert res.content == "     2\tz"
    assert res.details["encoding"] == "utf-8"


# -- session state ------------------------------------------------------------


def test_each_read_records_the_whole_file_hash(h: Any) -> None:
    data = _lines(5000).encode()
    (h.root / "f.txt").write_bytes(data)
    res = h.ok(h.read(h.root / "f.txt", offset=100, limit=1))
    digest = hashlib.sha256(data).hexdigest()
    assert res.details["file_state"] == {"path": f"{h.root}/f.txt", "sha256": digest}
    assert h.ledger.seen_hash(f"{h.root}/f.txt") == digest
    (h.root / "f.txt").write_bytes(data + b"more\n")
    h.ok(h.read(h.root / "f.txt", offset=1, limit=1))
    assert h.ledger.seen_hash(f"{h.root}/f.txt") == hashlib.sha256(data + b"more\n").hexdigest()


def test_failed_reads_record_nothing(h: Any) -> None:
    (h.root / "img.png").write_bytes(BINARIES["image.png"][0])
    (h.root / "f.txt").write_text("a\n")
    h.err(h.read(h.root / "img.png"), "binary_file")
    h.err(h.read(h.root / "f.txt", offset=9), "offset_out_of_range")
    assert h.ledger.hashes == {}


def test_read_changes_nothing_on_disk(h: Any) -> None:
    (h.root / "f.txt").write_text("a\n")
    before = os.stat(h.root / "f.txt")
    h.ok(h.read(h.root / "f.txt"))
    after = os.stat(h.root / "f.txt")
    assert (before.st_mtime_ns, before.st_size, before.st_mode) == (
        after.st_mtime_ns, after.st_size, after.st_mode)
    assert sorted(os.listdir(h.root)) == ["f.txt"]


# -- regressions ----------------------------------------------------------------


def test_regression_paging_deep_into_a_large_file_decoded_every_line_before_it(
    h: Any, monkeypatch: pytest.MonkeyPatch, read_path: str
) -> None:
    """Reading lines 2,600,000+ of a 100 MB file took ~40 s: every earlier line was decoded."""
    (h.root / "f.txt").write_text(_lines(300_000))
    decoded: list[int] = []
    real = tools.read.io.TextIOWrapper

    class Counting(real):  # type: ignore[misc,valid-type]
        def readline(self, size: int = -1) -> str:
            piece = super().readline(size)
            decoded.append(len(piece))
            return piece

    monkeypatch.setattr(tools.read.io, "TextIOWrapper", Counting)
    res = h.ok(h.read(h.root / "f.txt", offset=299_990, limit=3))
    assert res.content.split("\n")[:3] == [f"{n:>6}\tline {n}" for n in (299_990, 299_991, 299_992)]
    if read_path == "stream":
        assert sum(decoded) < 1000


@pytest.mark.parametrize("offset", [2, 3, 4, 5])
def test_paging_by_bytes_agrees_with_decoding_for_tricky_lines(h: Any, offset: int) -> None:
    data = (codecs.BOM_UTF8 + "é1\r\n".encode() + b"a\rb\n" + ("☃" * 3000 + "\n").encode()
            + b"x\r\n" + b"last")
    (h.root / "f.txt").write_bytes(data)
    res = h.ok(h.read(h.root / "f.txt", offset=offset, limit=1))
    expected = {2: "a\rb", 3: "☃" * 2000 + "[...line truncated]", 4: "x", 5: "last"}
    assert res.content.split("\n")[0] == f"{offset:>6}\t{expected[offset]}"


def test_paging_latin1_by_bytes(h: Any) -> None:
    (h.root / "f.txt").write_bytes("".join(f"ligne {i} é\n" for i in range(1, 50)).encode("latin-1"))
    res = h.ok(h.read(h.root / "f.txt", offset=40, limit=2))
    assert res.content.split("\n")[:2] == ["    40\tligne 40 é", "    41\tligne 41 é"]


@pytest.mark.parametrize("codec", ["utf-16", "utf-32"])
def test_paging_wide_encodings(h: Any, codec: str) -> None:
    (h.root / "f.txt").write_bytes("".join(f"zeile {i} ü\n" for i in range(1, 30)).encode(codec))
    res = h.ok(h.read(h.root / "f.txt", offset=20, limit=2))
    assert res.content.split("\n")[:2] == ["    20\tzeile 20 ü", "    21\tzeile 21 ü"]


def test_regression_small_file_path_stripped_two_carriage_returns_when_a_line_was_long(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"x\r\r\n" + b"y" * 2500 + b"\n")
    res = h.ok(h.read(h.root / "f.txt"))
    assert res.content.split("\n")[0] == "     1\tx\r"
