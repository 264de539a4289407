"""Per-call overhead of read and edit through the full dispatch path.

Run:  .venv/bin/python benchmarks/dispatch/overhead.py [--calls N]

For each tool it times, side by side in one run:
  bare   the file I/O alone (open, hash, read lines / mmap find + atomic rewrite),
         done with the same primitives the tool uses;
  tool   tools.run_tool (validation, path resolution, the tool itself);
  full   Dispatcher.call (the above plus ActionEvent + ObservationEvent in SQLite),
         with the event store at synchronous=NORMAL (default) and FULL;
and prints the medians and "overhead = full - bare" per call.  Target (issue 2):
under 2 ms per call beyond the file I/O itself.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from appliance import Dispatcher, Session
from appliance.events import EventStore
from appliance.policy import Gate
from tools import MemoryLedger, ToolContext, Workspace, native_tools, run_tool

CLOCK = time.perf_counter


def bare_atomic_write(directory: Path, name: str, data: bytes) -> None:
    """What the edit tool's write does to the disk: a temp file beside, fsync, rename."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = os.open(f".{name}.bench.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                     0o644, dir_fd=dfd)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(f".{name}.bench.tmp", name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        os.close(dfd)


def timed(fn: Callable[[], object], n: int) -> float:
    samples = []
    for _ in range(n):
        t0 = CLOCK()
        fn()
        samples.append(CLOCK() - t0)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--cpu", action="store_true",
                        help="time CPU (process_time) instead of wall clock: steadier on a busy "
                             "machine, but leaves out fsync waits")
    opts = parser.parse_args()
    n = opts.calls
    global CLOCK
    if opts.cpu:
        CLOCK = time.process_time
    tmp = Path(tempfile.mkdtemp(prefix="abhed-bench-"))
    ws_dir = tmp / "ws"
    ws_dir.mkdir()
    target = ws_dir / "module.py"
    text = "".join(f"def function_{i}(x):\n    return x + {i}\n\n" for i in range(700))
    target.write_text(text)  # ~20 KB, 2100 lines: a typical source file
    path = str(target)

    ws = Workspace(str(ws_dir))
    tools = native_tools()

    def bare_read() -> None:
        fd = os.open(path, os.O_RDONLY)
        data = os.read(fd, 1 << 22)
        os.close(fd)
        hashlib.sha256(data).hexdigest()
        [f"{i:>6}\t{line}" for i, line in enumerate(data.decode().splitlines()[:2000], 1)]

    toggle = [False]

    def bare_edit() -> None:
        old, new = ("return x + 5\n", "return x + 5 \n") if not toggle[0] else ("return x + 5 \n", "return x + 5\n")
        toggle[0] = not toggle[0]
        fd = os.open(path, os.O_RDONLY)
        data = os.read(fd, 1 << 22)
        os.close(fd)
        hashlib.sha256(data).hexdigest()
        i = data.find(old.encode())
        out = data[:i] + new.encode() + data[i + len(old):]
        bare_atomic_write(ws_dir, "module.py", out)

    ledger = MemoryLedger()
    ctx = ToolContext(workspace=ws, ledger=ledger)
    ledger.observe(run_tool(tools["read"], {"path": path}, ctx))
    flip = [False]

    def edit_args() -> dict[str, object]:
        flip[0] = not flip[0]
        a, b = ("return x + 7\n", "return x + 7 \n")
        old, new = (a, b) if flip[0] else (b, a)
        return {"path": path, "old_string": old, "new_string": new}

    def tool_read() -> None:
        ledger.observe(run_tool(tools["read"], {"path": path}, ctx))

    def tool_edit() -> None:
        r = run_tool(tools["edit"], edit_args(), ctx)
        assert r.ok, r.content
        ledger.observe(r)

    rows: list[tuple[str, float, float, float, float]] = []
    bare_r = timed(bare_read, n)
    bare_e = timed(bare_edit, n)
    tool_r = timed(tool_read, n)
    tool_e = timed(tool_edit, n)
    full: dict[str, tuple[float, float]] = {}
    for sync in ("NORMAL", "FULL"):
        store = EventStore(tmp / f"events-{sync}.db", synchronous=sync)
        session = Session.create(store, ws.root, version="bench")
        dctx = ToolContext(workspace=ws, ledger=session)
        d = Dispatcher(session, tools, dctx, Gate.permissive())
        d.call("read", {"path": path})
        fr = timed(lambda d=d: d.call("read", {"path": path}), n)
        fe = timed(lambda d=d: (lambda r: None if r.ok else (_ for _ in ()).throw(AssertionError(r.content)))(
            d.call("edit", edit_args())), n)
        full[sync] = (fr, fe)
        store.close()
    for name, bare, tool, key in (("read", bare_r, tool_r, 0), ("edit", bare_e, tool_e, 1)):
        rows.append((name, bare, tool, full["NORMAL"][key], full["FULL"][key]))

    clock = "CPU time" if opts.cpu else "wall clock"
    print(f"{clock}: per-call medians over {n} calls, file {len(text)} bytes / 2100 lines (ms)")
    print(f"{'tool':<6}{'bare I/O':>10}{'run_tool':>10}{'dispatch':>10}{'dispatch':>10}"
          f"{'overhead':>10}{'overhead':>10}")
    print(f"{'':<6}{'':>10}{'':>10}{'NORMAL':>10}{'FULL':>10}{'NORMAL':>10}{'FULL':>10}")
    for name, bare, tool, fn, ff in rows:
        print(f"{name:<6}{bare:>10.3f}{tool:>10.3f}{fn:>10.3f}{ff:>10.3f}{fn - bare:>10.3f}{ff - bare:>10.3f}")
    print("overhead = dispatch - bare I/O; target < 2 ms (synchronous=NORMAL is the default)")


if __name__ == "__main__":
    main()
