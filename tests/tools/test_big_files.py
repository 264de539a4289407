"""100 MB files: read of a window and edit work, and memory stays bounded.

Each measurement runs in a fresh child process, so the numbers are not
polluted by the test runner.  read streams, so its peak RSS is the measure.
edit maps the file (``mmap``): pages of a mapped file count towards RSS while
touched but are page cache the kernel can drop, not memory the tool holds; so
edit is measured by the Python heap peak (tracemalloc) and by the peak of
anonymous memory (``RssAnon``), sampled while it runs.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MB = 1 << 20
LINE = b"%08d the quick brown fox jumps over the lazy dog, again and again\n"
LINE_LEN = len(LINE % 0)
LINES = 100 * MB // LINE_LEN + 1
MARK_LINE = LINES // 2
MARKER = b"UNIQUE_MARKER_IN_THE_MIDDLE"


def _content(replace: bytes | None = None) -> Iterator[bytes]:
    block: list[bytes] = []
    for i in range(1, LINES + 1):
        line = LINE % i
        if i == MARK_LINE:
            line = line[:-1] + b" " + (replace if replace is not None else MARKER) + b"\n"
        block.append(line)
        if len(block) == 20000:
            yield b"".join(block)
            block = []
    yield b"".join(block)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("big").resolve()
    target = root / "big.txt"
    digest = hashlib.sha256()
    with open(target, "wb") as fh:
        for chunk in _content():
            fh.write(chunk)
            digest.update(chunk)
    assert target.stat().st_size >= 100 * MB
    return root, target, digest.hexdigest()


_CHILD = textwrap.dedent(
    """
    import json, sys, threading, tracemalloc
    from tools import MemoryLedger, ToolContext, Workspace, native_tools, run_tool

    def status_kb(field):
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def anon_kb():
        return status_kb("RssAnon")

    def hwm_kb():
        # VmHWM, not ru_maxrss: Linux carries the forked parent's peak (the
        # whole pytest process) across exec into ru_maxrss, hiding growth.
        return status_kb("VmHWM")

    root, calls = sys.argv[1], json.loads(sys.argv[2])
    tools = native_tools()
    ledger = MemoryLedger()
    ctx = ToolContext(workspace=Workspace(root), ledger=ledger)
    run_tool(tools["glob"], {"pattern": "nothing"}, ctx)  # warm imports before measuring
    out = []
    for name, args in calls:
        base_rss = hwm_kb()
        base_anon = anon_kb()
        peak = [base_anon]
        stop = threading.Event()

        def sample():
            while not stop.wait(0.002):
                peak[0] = max(peak[0], anon_kb())

        sampler = threading.Thread(target=sample)
        sampler.start()
        tracemalloc.start()
        res = run_tool(tools[name], args, ctx)
        heap_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        stop.set()
        sampler.join()
        peak[0] = max(peak[0], anon_kb())
        ledger.observe(res)
        out.append({
            "result": json.loads(res.model_dump_json()),
            "maxrss_growth_kb": hwm_kb() - base_rss,
            "anon_growth_kb": peak[0] - base_anon,
            "heap_peak_kb": heap_peak // 1024,
        })
    print(json.dumps(out))
    """
)


def _run(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(root), json.dumps(calls)],
                          check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    measured: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    for m in measured:  # shown with -s, and in the report
        print({k: v for k, v in m.items() if k != "result"}, m["result"]["content"][:80])
    return measured


@pytest.mark.slow
def test_read_window_of_a_100mb_file_in_bounded_memory(big: tuple[Path, Path, str]) -> None:
    root, target, digest = big
    [first, deep] = _run(root, [("read", {"path": str(target)}),
                                ("read", {"path": str(target), "offset": MARK_LINE - 1, "limit": 3})])
    for m in (first, deep):
        assert m["result"]["ok"], m["result"]["content"]
        assert m["result"]["details"]["file_state"]["sha256"] == digest
        assert m["result"]["details"]["total_lines"] == LINES
        assert m["maxrss_growth_kb"] < 40 * 1024, m  # well under the 100 MB file
        assert m["heap_peak_kb"] < 30 * 1024, m
    assert first["result"]["truncated"] is True
    # 2000 lines of this file are over the 100,000-character cap: the window stops early
    end = first["result"]["details"]["end_line"]
    assert end < 2000
    assert first["result"]["content"].endswith(
        f"[truncated: showing lines 1-{end} of {LINES}; read returns at most 100000 characters "
        f"per call. Use offset={end + 1} to read on.]")
    lines = deep["result"]["content"].split("\n")
    assert lines[0] == f"{MARK_LINE - 1:>6}\t" + (LINE % (MARK_LINE - 1)).decode().rstrip("\n")
    assert lines[1].endswith(MARKER.decode())


@pytest.mark.slow
def test_edit_of_a_100mb_file_in_bounded_memory(big: tuple[Path, Path, str]) -> None:
    root, target, _ = big
    [read, edit] = _run(root, [
        ("read", {"path": str(target), "offset": 1, "limit": 1}),
        ("edit", {"path": str(target), "old_string": MARKER.decode(), "new_string": "EDITED"}),
    ])
    assert read["result"]["ok"]
    res = edit["result"]
    assert res["ok"], res["content"]
    assert res["details"]["lines"] == [MARK_LINE]
    assert f"{MARK_LINE:>6}\t" in res["content"]
    assert edit["heap_peak_kb"] < 30 * 1024, edit
    assert edit["anon_growth_kb"] < 40 * 1024, edit  # file pages aside, nothing near 100 MB
    expected = hashlib.sha256()
    for chunk in _content(b"EDITED"):
        expected.update(chunk)
    actual = hashlib.sha256()
    with open(target, "rb") as fh:
        while chunk := fh.read(MB):
            actual.update(chunk)
    assert actual.hexdigest() == expected.hexdigest() == res["details"]["sha256_after"]
    assert sorted(p.name for p in root.iterdir()) == ["big.txt"]
