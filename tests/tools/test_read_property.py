"""Property: write then read shows exactly the text written, the same way on both
read paths (small files decoded whole, large ones streamed)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tools.read
from tools import MemoryLedger, ToolContext, ToolSettings, Workspace, native_tools, run_tool

TOOLS = native_tools()
MAX_CHARS = 80  # the smallest the operator may set, so long lines are cheap to generate
LIMIT = 50


def _expected(text: str, offset: int) -> str:
    if not text:
        return "[file exists but is empty]"
    # Only LF ends a line (not U+2028, VT, FF ...), except in a CR-only file, where CR does.
    nl = "\r" if "\r" in text and "\n" not in text else "\n"
    rows = text.split(nl)
    if text.endswith(nl):
        rows.pop()
    out = []
    for n, row in enumerate(rows[offset - 1 : offset - 1 + LIMIT], offset):
        row = row.removesuffix("\r") if nl == "\n" else row
        out.append(f"{n:>6}\t{row[:MAX_CHARS]}[...line truncated]" if len(row) > MAX_CHARS
                   else f"{n:>6}\t{row}")
    body = "\n".join(out)
    end = offset + len(out) - 1
    if end < len(rows):
        body += f"\n[truncated: showing lines {offset}-{end} of {len(rows)}. Use offset/limit to read more.]"
    lf, crlf = text.count("\n"), text.count("\r\n")
    if crlf and crlf == lf:
        body += ("\n[note: this file uses CRLF line endings; they are shown as line breaks, "
                 "and edit and write keep them (\\n in old_string/new_string means CRLF)]")
    elif nl == "\r":
        body += ("\n[note: this file uses CR line endings (classic Mac OS); they are shown as "
                 "line breaks, and edit and write keep them (\\n means CR)]")
    return body


TEXT = st.lists(st.sampled_from(list("ab \t\r\n\né☃😀\u2028\x0b\x0c\x1c\u0085") + ["x" * 50]),
                max_size=120).map("".join)


@pytest.mark.parametrize("path", ["whole", "stream"])
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=TEXT, offset=st.integers(1, 12))
def test_write_then_read_shows_exactly_the_text(
    monkeypatch: pytest.MonkeyPatch, path: str, text: str, offset: int
) -> None:
    monkeypatch.setattr(tools.read, "_WHOLE_FILE_BYTES", 0 if path == "stream" else 4 << 20)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        s = ToolSettings(read_max_line_chars=MAX_CHARS, read_default_limit_lines=LIMIT)
        ctx = ToolContext(workspace=Workspace(str(root)), settings=s, ledger=MemoryLedger())
        target = str(root / "f.txt")
        assert run_tool(TOOLS["write"], {"path": target, "content": text}, ctx).ok
        res = run_tool(TOOLS["read"], {"path": target, "offset": offset}, ctx)
        nl = "\r" if "\r" in text and "\n" not in text else "\n"
        rows = len(text.split(nl)) - (1 if text.endswith(nl) else 0) if text else 0
        if text and offset > rows:
            assert res.error is not None and res.error.code == "offset_out_of_range"
            return
        assert res.ok, res.content
        assert res.content == _expected(text, offset)
