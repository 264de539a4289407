"""The pure-Python engine's speed-ups (issue 16) never change an answer.

RE2's Unicode case folding gives two ASCII letters non-ASCII equivalents (k:
KELVIN SIGN, s: LONG S), which any case-insensitive shortcut must still find
(an ASCII-lowering prefilter was measured, slower than RE2, and dropped).  The
readahead thread hands open descriptors to the search; none may leak.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools import ToolContext, ToolSettings, Workspace, run_tool
from tools._grep import PythonEngine, RipgrepEngine, compile_query, find_rg
from tools.grep import Grep

TEXTS = {
    "plain.c": "spin_lock_irqsave(&x);\n",
    "upper.c": "SPIN_LOCK_IRQSAVE(&x);\n",
    "mixed.c": "Spin_Lock_IrqSave\n",
    "kelvin.c": "spin_loc\u212a_irqsave\n",  # KELVIN SIGN folds to k
    "longs.c": "\u017fpin_lock_irq\u017fave\n",  # LONG S folds to s
    "none.c": "spin_unlock\nspin lock irqsave\n",
    "split.c": "spin_lock_\nirqsave\n",
}


def test_case_insensitive_literal_finds_every_fold(tmp_path: Path) -> None:
    for name, text in TEXTS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    ws = Workspace(str(tmp_path))
    query = compile_query("spin_lock_irqsave", multiline=False, case_insensitive=True)
    files = sorted(str(tmp_path / n) for n in TEXTS)
    got = PythonEngine(1, readahead=True).scan(files, query, count=True)
    want = {str(tmp_path / n): 1 for n in ("plain.c", "upper.c", "mixed.c", "kelvin.c", "longs.c")}
    assert got.counts == want
    assert PythonEngine(1, readahead=False).scan(files, query, count=True).counts == want
    rg = find_rg()
    if rg is not None:
        assert RipgrepEngine(rg, ws.root).scan(files, query, count=True).counts == want
    lines = PythonEngine().lines(files, query, max_lines=5)
    assert lines[str(tmp_path / "kelvin.c")][0].text == TEXTS["kelvin.c"].rstrip("\n").encode()


def test_case_insensitive_multiline_uses_the_same_prefilter(tmp_path: Path) -> None:
    (tmp_path / "a.c").write_text("x\nSPIN_LOCK_IRQSAVE\n")
    (tmp_path / "b.c").write_text("nothing here\n")
    ctx = ToolContext(Workspace(str(tmp_path)), ToolSettings(grep_engine="python"))
    out = run_tool(Grep(), {"pattern": "spin_lock_irqsave", "case_insensitive": True,
                            "multiline": True}, ctx)
    assert out.ok and out.content.splitlines() == [str(tmp_path.resolve() / "a.c")]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_readahead_leaves_no_descriptor_open(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"f{i:03}.txt").write_text("needle\n" if i % 7 == 0 else "hay\n")
    files = sorted(str(p) for p in tmp_path.iterdir())
    files.insert(5, str(tmp_path / "vanished.txt"))  # fails to open: an unreadable outcome
    query = compile_query("needle", multiline=False, case_insensitive=False)
    before = _open_fds()
    result = PythonEngine(1, readahead=True).scan(files, query, count=False)
    assert len(result.counts) == 43 and result.unreadable == [str(tmp_path / "vanished.txt")]
    assert _open_fds() == before


def test_readahead_abandoned_midway_closes_what_it_opened(tmp_path: Path) -> None:
    from tools._grep import _pyengine

    for i in range(200):
        (tmp_path / f"f{i:03}.txt").write_text("x\n")
    files = sorted(str(p) for p in tmp_path.iterdir())
    query = compile_query("x", multiline=False, case_insensitive=False)
    before = _open_fds()
    ahead = _pyengine._Readahead(files)
    it = ahead.search(query, "any", bytearray(1 << 16))
    for _ in range(40):  # into the second chunk, with more chunks opened ahead
        next(it)
    ahead.stop()
    assert _open_fds() == before


def _tree(tmp_path: Path) -> list[str]:
    for i in range(40):
        (tmp_path / f"f{i:02}.txt").write_text(("needle\n" if i % 3 == 0 else "hay\n") * (i + 1))
    big = tmp_path / "big.txt"  # over one 4 MiB chunk: the rest is read after the cached chunk
    big.write_bytes(b"x" * (5 << 20) + b"\nneedle at the end\nneedle\n")
    return sorted(str(p) for p in tmp_path.iterdir())


def _count(files: list[str], readahead: bool) -> dict[str, int]:
    query = compile_query("needle", multiline=False, case_insensitive=False)
    return PythonEngine(1, readahead=readahead).scan(files, query, count=True).counts


def test_cached_first_read_gives_the_same_counts_including_a_file_over_one_chunk(
        tmp_path: Path) -> None:
    files = _tree(tmp_path)
    want = _count(files, readahead=False)
    assert want[str(tmp_path / "big.txt")] == 2
    assert _count(files, readahead=True) == want


@pytest.mark.parametrize("failure", ["would_block", "short", "unsupported"])
def test_a_first_read_that_is_not_all_cached_falls_back_to_reading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    from tools._grep import _scan

    files = _tree(tmp_path)
    want = _count(files, readahead=False)
    real = os.preadv
    calls = {"n": 0}

    def flaky(fd: int, buffers: list[bytearray], offset: int, flags: int = 0) -> int:
        calls["n"] += 1
        if calls["n"] < 5:
            return real(fd, buffers, offset, flags)
        if failure == "would_block":
            raise BlockingIOError(11, "Resource temporarily unavailable")
        if failure == "unsupported":
            raise OSError(95, "Operation not supported")
        got = real(fd, buffers, offset, flags)
        return min(got, 2)  # a short read: only part of the file was in the cache

    monkeypatch.setattr(_scan.os, "preadv", flaky)
    monkeypatch.setattr(_scan, "_NOWAIT_STATE", [True])
    assert _count(files, readahead=True) == want
    if failure == "unsupported":
        assert not _scan.nowait_supported()
