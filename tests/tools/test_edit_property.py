"""Property (issue 2): edit never changes a byte outside the matched region.

Files are random mixes of ASCII, CRLF and LF, tabs, multi-byte UTF-8, and
bytes that are not valid UTF-8 (so some files read as Latin-1 and some as
UTF-8 with invalid bytes kept).  A random unique slice of the file is
replaced through the real tool; the bytes before and after it must come back
exactly.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tools import MemoryLedger, ToolContext, Workspace, native_tools, run_tool
from tools._text_files import decode, encode, file_facts

PIECES = [b"a", b"b", b"x", b"def", b" ", b"  ", b"\t", b"\n", b"\r\n", b"\r", b"(", b"}",
          "é".encode(), "☃".encode(), "😀".encode(), b"\xff", b"\x80", b"\xc3", b"\xe2\x98"]

TOOLS = native_tools()


@st.composite
def file_and_slice(draw: st.DrawFn) -> tuple[bytes, int, int]:
    data = b"".join(draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=80)))
    start = draw(st.integers(0, len(data) - 1))
    end = draw(st.integers(start + 1, min(len(data), start + 40)))
    return data, start, end


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=file_and_slice(), new=st.text(alphabet="ab \t\n\r\néZ☃", max_size=20))
def test_edit_never_changes_bytes_outside_the_match(case: tuple[bytes, int, int], new: str) -> None:
    data, start, end = case
    needle = data[start:end]
    assume(data.find(needle) == start and data.find(needle, start + 1) == -1)  # unique
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        target = root / "f.txt"
        target.write_bytes(data)
        fd = os.open(target, os.O_RDONLY)
        try:
            facts = file_facts(fd)
        finally:
            os.close(fd)
        assume(not facts.bom)
        try:
            old = decode(needle, facts)
        except UnicodeDecodeError:
            assume(False)  # the slice splits a character of a valid UTF-8 file: not text
        # The slice is expressible as text a model writes: in a uniformly CRLF (or CR)
        # file a \n in old_string means that line ending, so a slice starting
        # between a CR and its LF is not.
        assume(encode(facts.to_file_text(old), facts, what="old") == needle)
        assume(old != new)
        ledger = MemoryLedger()
        ctx = ToolContext(workspace=Workspace(str(root)), ledger=ledger)
        read = run_tool(TOOLS["read"], {"path": str(target)}, ctx)
        assume(read.ok)  # random bytes can look like a binary format's magic number
        ledger.observe(read)
        res = run_tool(TOOLS["edit"], {"path": str(target), "old_string": old, "new_string": new}, ctx)
        after = target.read_bytes()
        if not res.ok:
            # Only a replacement the file's encoding cannot hold may fail, and then nothing changes.
            assert res.error is not None and res.error.code == "encoding_error", res.content
            assert after == data
            return
        prefix, suffix = data[:start], data[end:]
        assert after[:start] == prefix
        assert len(after) >= len(prefix) + len(suffix)
        assert after[len(after) - len(suffix):] == suffix
        middle = after[start:len(after) - len(suffix)]
        # One codec: a bare LF in new_string is written as the file's uniform line ending.
        assert middle == encode(facts.to_file_text(new), facts, what="new")
        assert sorted(os.listdir(root)) == ["f.txt"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.sampled_from([b"ab", b"a", b"b", b" ", b"\n", b"\t", "é".encode()]),
                     min_size=1, max_size=60).map(b"".join),
       needle=st.sampled_from(["a", "ab", "b\n", "a a", "\n\n", "é", "\t"]),
       new=st.sampled_from(["", "Z", "ZZZ", "ab", "a", "\n", "é☃"]))
def test_replace_all_equals_bytes_replace(data: bytes, needle: str, new: str) -> None:
    """On an LF file, replace_all is exactly Python's non-overlapping left-to-right replace."""
    assume(needle.encode() in data and needle != new)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        target = root / "f.txt"
        target.write_bytes(data)
        ledger = MemoryLedger()
        ctx = ToolContext(workspace=Workspace(str(root)), ledger=ledger)
        ledger.observe(run_tool(TOOLS["read"], {"path": str(target)}, ctx))
        res = run_tool(TOOLS["edit"], {"path": str(target), "old_string": needle, "new_string": new,
                                       "replace_all": True}, ctx)
        assert res.ok, res.content
        assert target.read_bytes() == data.replace(needle.encode(), new.encode())
        assert res.details["replacements"] == data.count(needle.encode())
