"""grep benchmark: the pure-Python engine beside ripgrep, same trees, same thread count.

Usage (from the repository root):

    .venv/bin/python benchmarks/grep/run.py [--threads N] [--repeat R] [--cold] [--trees stdlib,linux]
        [--patterns literal,ci-literal,alternation,class] [--modes files_with_matches,content]
        [--no-warm]    # with --cold: cold cells only (a subset, when the full matrix is too slow)
    .venv/bin/python benchmarks/grep/run.py --memory     # 1 GB file and 500,000-file tree

Cells: tree x pattern x mode (files_with_matches, content) x cache (warm, cold).
Each cell runs grep's own search path (walk once, then the engine scan and, in
content mode, the line listing) with the engine forced, and prints the median
seconds for each engine and the ratio python/ripgrep, in wall time and in CPU
time (this process for the Python engine, the rg child for the ripgrep
engine: the steadier figure on a loaded machine).  The walk is timed once
per tree on its own, since both engines share it.  ``rg-raw`` is plain ``rg``
doing its own directory walk, for reference (with ``--no-require-git``, so it
applies .gitignore files outside a git repository as grep's walker does).

Cold cells drop the page cache before every run (``echo 3 >
/proc/sys/vm/drop_caches``, root only); without permission they are skipped
with a note.  Trees live under ~/.cache/abhed-bench/grep (or
$ABHED_BENCH_CACHE), outside the repository so they never reach git: the
stdlib is hard-linked there on first use; the Linux tree comes from
``benchmarks/grep/prepare-kernel.sh`` (``--clean`` deletes it again).
``--memory`` generates its data once under the same cache, in ``mem/`` (about
3 GB on disk); each memory cell runs in a fresh child process and prints its
peak RSS; rg's own peak comes from GNU ``time``.  Delete ``mem/`` afterwards.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench import cpu_now, need_rg  # noqa: E402

from tests.helpers import link_tree  # noqa: E402
from tools import ToolSettings, Workspace  # noqa: E402 (after the sys.path line)
from tools.grep import (  # noqa: E402
    Engine,
    GrepArgs,
    PythonEngine,
    RipgrepEngine,
    collect,
    compile_query,
    search,
)

# Outside the repository on purpose: inside it, git's ignore rules (the cache
# is gitignored) would hide the trees from grep's own walker.
CACHE = Path(os.environ.get("ABHED_BENCH_CACHE", Path.home() / ".cache" / "abhed-bench" / "grep"))
PATTERNS = {
    "stdlib": [("literal", "PyErr_SetString", False), ("ci-literal", "pyerr_setstring", True),
               ("alternation", "(TODO|FIXME|XXX)", False),
               ("class", r"[A-Z][a-z]+Error\b", False)],
    "linux": [("literal", "spin_lock_irqsave", False), ("ci-literal", "spin_lock_irqsave", True),
              ("alternation", "(TODO|FIXME|XXX)", False),
              ("class", r"[A-Z][a-z]+Error\b", False)],
}


def stdlib_tree() -> Path:
    return link_tree(sysconfig.get_paths()["stdlib"], CACHE / "stdlib")


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return True
    except OSError:
        return False


def rg_peak_mib(cmd: list[str]) -> float | None:
    """rg's own peak RSS, measured by GNU time.

    ``RUSAGE_CHILDREN`` cannot tell it: a child started from this process
    inherits this process's RSS high-water mark across fork and exec, so it
    would report the Python process's peak, not rg's.
    """
    gnu_time = shutil.which("time", path="/usr/bin:/bin")
    if gnu_time is None:
        return None
    out = subprocess.run([gnu_time, "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, check=False)
    try:
        return int(out.stderr.decode().strip().splitlines()[-1]) / 1024
    except (ValueError, IndexError):
        return None


def show_mib(v: float | None) -> str:
    return "n/a (no /usr/bin/time)" if v is None else f"{v:.0f} MiB"


def timed(fn, repeat: int, cold: bool) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Median wall seconds and median CPU seconds of ``repeat`` runs.

    CPU time is the steadier measure on a shared, loaded machine (the wall
    time there is mostly waiting for a core); the two engines' runs are
    interleaved cell by cell, so both see the same load.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        if cold:
            drop_caches()
        c, t = cpu_now(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(cpu_now() - c)
    return statistics.median(walls), statistics.median(cpus)


def bench_tree(name: str, root: Path, threads: int, repeat: int, caches: list[str], rg: str,
               labels: set[str] | None, modes: list[str]) -> None:
    ws = Workspace(str(root))
    t = time.perf_counter()
    cands = collect(ws, ws.root, True, None, ToolSettings())
    walk_s = time.perf_counter() - t
    size = sum(os.lstat(p).st_size for p in cands.files)
    print(f"\n== {name}: {len(cands.files)} files, {size / 1e6:.0f} MB, walk {walk_s:.2f} s "
          f"(shared by both engines, not in the cells), threads={threads}")
    engines: dict[str, Engine] = {"python": PythonEngine(threads, readahead=True),
               "ripgrep": RipgrepEngine(rg, ws.root, threads)}
    header = (f"{'pattern':12} {'mode':18} {'cache':5} {'python s':>9} {'ripgrep s':>9} {'ratio':>6} "
              f"{'py cpu':>7} {'rg cpu':>7} {'ratio':>6} {'rg-raw s':>9} {'load':>5}")
    print(header)
    print("-" * len(header))
    for label, pattern, ci in PATTERNS[name]:
        if labels is not None and label not in labels:
            continue
        query = compile_query(pattern, multiline=False, case_insensitive=ci)
        for mode in modes:
            args = GrepArgs.model_validate({"pattern": pattern, "output_mode": mode, "case_insensitive": ci})
            for cache in caches:
                cold = cache == "cold"
                res: dict[str, tuple[float, float]] = {}
                for ename, eng in engines.items():
                    if not cold:
                        search(eng, query, cands.files, args, 0, ws.root)  # warm up
                    res[ename] = timed(
                        lambda e=eng, q=query, g=args: search(e, q, cands.files, g, 0, ws.root),
                        repeat, cold)
                raw = [rg, "--no-config", "--no-require-git", "-j", str(threads), "--no-messages"]
                raw += (["-i"] if ci else []) + (["-l"] if mode == "files_with_matches" else ["-n"])
                raw += ["-e", pattern, str(root)]
                raw_s = timed(
                    lambda r=raw: subprocess.run(r, stdout=subprocess.DEVNULL, check=False),
                    repeat, cold)[0]
                (py_s, py_cpu), (rg_s, rg_cpu) = res["python"], res["ripgrep"]
                print(f"{label:12} {mode:18} {cache:5} {py_s:9.3f} {rg_s:9.3f} {py_s / rg_s:6.2f} "
                      f"{py_cpu:7.3f} {rg_cpu:7.3f} {py_cpu / max(rg_cpu, 1e-9):6.2f} "
                      f"{raw_s:9.3f} {os.getloadavg()[0]:5.1f}", flush=True)
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: this process (walk + python engine) {me:.0f} MiB; rg-raw, last cell: "
          f"{show_mib(rg_peak_mib(raw))}")


MEM_CELLS = {"1gb": "1 GB file", "500k": "500,000 files"}


def memory_data() -> dict[str, Path]:
    """Generate (once) the memory cells' data under the cache, outside git."""
    big = CACHE / "mem" / "big"
    big.mkdir(parents=True, exist_ok=True)
    f = big / "1gb.txt"
    if not f.exists() or f.stat().st_size < 1 << 30:
        line = b"lorem ipsum dolor sit amet, consectetur adipiscing elit\n"
        block = line * ((1 << 20) // len(line) + 1)  # ~1 MiB per write
        with open(f, "wb") as fh:
            while fh.tell() < 1 << 30:
                fh.write(block)
            fh.write(b"the needle\n")
    many = CACHE / "mem" / "many"
    marker = CACHE / "mem" / "many.done"  # outside the tree, so not a candidate
    if not marker.exists():
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        for i in range(500):
            d = many / f"d{i:03d}"
            d.mkdir(parents=True, exist_ok=True)
            for j in range(1000):
                fd = os.open(d / f"f{j:04d}.txt", flags, 0o644)
                os.write(fd, b"x = %d%s\n" % (j, b" needle" if i == 499 and j == 999 else b""))
                os.close(fd)
        marker.write_text("")
    return {"1gb": big, "500k": many}


def memory(threads: int) -> None:
    """Each cell in a fresh child process, so one cell's peak cannot hide another's."""
    memory_data()
    for cell in MEM_CELLS:
        for mode in ("files_with_matches", "content"):
            subprocess.run([sys.executable, __file__, "--memory-cell", f"{cell}:{mode}",
                            "--threads", str(threads)], check=True)


def memory_cell(spec: str, threads: int, rg: str) -> None:
    cell, mode = spec.split(":")
    root = memory_data()[cell]
    ws = Workspace(str(root))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    cands = collect(ws, ws.root, True, None, ToolSettings())
    walk_s = time.perf_counter() - t
    walked = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    query = compile_query("needle", multiline=False, case_insensitive=False)
    args = GrepArgs.model_validate({"pattern": "needle", "output_mode": mode})
    t = time.perf_counter()
    r = search(PythonEngine(threads), query, cands.files, args, 0, ws.root)
    py_s = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    rr = search(RipgrepEngine(rg, ws.root, threads), query, cands.files, args, 0, ws.root)
    rg_s = time.perf_counter() - t
    raw = [rg, "--no-config", "--no-require-git", "-j", str(threads), "--no-messages",
           "-l" if mode == "files_with_matches" else "-n", "-e", "needle", str(root)]
    kids = rg_peak_mib(raw)
    same = r.content == rr.content
    print(f"{MEM_CELLS[cell]:14} {mode:18} files {len(cands.files):7} walk {walk_s:5.1f} s  "
          f"python {py_s:5.1f} s  rg-engine {rg_s:5.1f} s  RSS: after imports {base:4.0f} MiB, "
          f"after walk {walked:4.0f} MiB, peak {peak:4.0f} MiB; rg-raw peak {show_mib(kids)}; "
          f"ok={r.ok} same-as-rg={same} load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="also run cold-cache cells (root only)")
    ap.add_argument("--trees", default="stdlib,linux")
    ap.add_argument("--no-warm", action="store_true", help="skip warm cells (with --cold)")
    ap.add_argument("--patterns", default="", help="comma-separated labels; default all")
    ap.add_argument("--modes", default="files_with_matches,content")
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--memory-cell", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    rg = need_rg()
    print(f"rg: {rg}; python {sys.version.split()[0]}; cpus {os.cpu_count()}; "
          f"load {os.getloadavg()[0]:.1f}")
    if a.memory_cell:
        memory_cell(a.memory_cell, a.threads, rg)
        return
    if a.memory:
        memory(a.threads)
        return
    cold_ok = a.cold and drop_caches()
    if a.cold and not cold_ok:
        print("cold cells skipped: dropping the page cache needs root (/proc/sys/vm/drop_caches)")
    caches = ([] if a.no_warm else ["warm"]) + (["cold"] if cold_ok else [])
    labels = set(a.patterns.split(",")) if a.patterns else None
    modes = a.modes.split(",")
    for tree in a.trees.split(","):
        if tree == "stdlib":
            bench_tree("stdlib", stdlib_tree(), a.threads, a.repeat, caches, rg, labels, modes)
        elif tree == "linux":
            root = CACHE / "linux"
            if not root.is_dir():
                print("\n== linux: not prepared; run benchmarks/grep/prepare-kernel.sh first")
                continue
            bench_tree("linux", root.resolve(), a.threads, a.repeat, caches, rg, labels, modes)


if __name__ == "__main__":
    main()
