"""grep benchmark: the pure-Python engine beside ripgrep, same trees, same thread count.

Usage (from the repository root):

    .venv/bin/python benchmarks/grep/run.py [--threads N] [--repeat R] [--cold] [--trees stdlib,linux]
    .venv/bin/python benchmarks/grep/run.py --memory     # 1 GB file and 500,000-file tree

Cells: tree x pattern x mode (files_with_matches, content) x cache (warm, cold).
Each cell runs grep's own search path (walk once, then the engine scan and, in
content mode, the line listing) with the engine forced, and prints the median
seconds for each engine and the ratio python/ripgrep.  The walk is timed once
per tree on its own, since both engines share it.  ``rg-raw`` is plain ``rg``
doing its own directory walk, for reference.

Cold cells drop the page cache before every run (``echo 3 >
/proc/sys/vm/drop_caches``, root only); without permission they are skipped
with a note.  Trees live under ~/.cache/abhed-bench/grep (or
$ABHED_BENCH_CACHE), outside the repository so they never reach git: the
stdlib is hard-linked there on first use; the Linux tree comes from
``benchmarks/grep/prepare-kernel.sh``.
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

from tools import ToolSettings, Workspace  # noqa: E402
from tools._grep import PythonEngine, RipgrepEngine, collect, compile_query, find_rg  # noqa: E402
from tools.grep import GrepArgs, _search  # noqa: E402

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
    dst = CACHE / "stdlib"
    if not dst.exists():
        def cp(s: str, d: str) -> None:
            try:
                os.link(s, d)
            except OSError:
                shutil.copy2(s, d)
        shutil.copytree(sysconfig.get_paths()["stdlib"], dst, symlinks=True, copy_function=cp,
                        ignore=shutil.ignore_patterns("site-packages", "__pycache__", "config-*"))
    return dst.resolve()


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return True
    except OSError:
        return False


def timed(fn, repeat: int, cold: bool) -> float:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(repeat):
        if cold:
            drop_caches()
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def bench_tree(name: str, root: Path, threads: int, repeat: int, cold_ok: bool, rg: str) -> None:
    ws = Workspace(str(root))
    t = time.perf_counter()
    cands = collect(ws, ws.root, True, None, ToolSettings())
    walk_s = time.perf_counter() - t
    size = sum(os.lstat(p).st_size for p in cands.files)
    print(f"\n== {name}: {len(cands.files)} files, {size / 1e6:.0f} MB, walk {walk_s:.2f} s "
          f"(shared by both engines, not in the cells), threads={threads}")
    engines = {"python": PythonEngine(threads, readahead=True),
               "ripgrep": RipgrepEngine(rg, ws.root, threads)}
    header = f"{'pattern':12} {'mode':18} {'cache':5} {'python s':>9} {'ripgrep s':>9} {'ratio':>6} {'rg-raw s':>9}"
    print(header)
    print("-" * len(header))
    caches = ["warm"] + (["cold"] if cold_ok else [])
    for label, pattern, ci in PATTERNS[name]:
        query = compile_query(pattern, multiline=False, case_insensitive=ci)
        for mode in ("files_with_matches", "content"):
            args = GrepArgs(pattern=pattern, output_mode=mode, case_insensitive=ci)
            for cache in caches:
                cold = cache == "cold"
                res = {}
                for ename, eng in engines.items():
                    if not cold:
                        _search(eng, query, cands.files, args, 0, ws.root)  # warm up
                    res[ename] = timed(lambda: _search(eng, query, cands.files, args, 0, ws.root),
                                       repeat, cold)
                raw = [rg, "--no-config", "-j", str(threads), "--no-messages"] + (["-i"] if ci else [])
                raw += (["-l"] if mode == "files_with_matches" else ["-n"]) + ["-e", pattern, str(root)]
                raw_s = timed(lambda: subprocess.run(raw, stdout=subprocess.DEVNULL, check=False),
                              repeat, cold)
                print(f"{label:12} {mode:18} {cache:5} {res['python']:9.3f} {res['ripgrep']:9.3f} "
                      f"{res['python'] / res['ripgrep']:6.2f} {raw_s:9.3f}")
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS: this process (python engine + walk) {me:.0f} MiB; largest child (rg) {kids:.0f} MiB")


def memory(threads: int) -> None:
    big = CACHE / "mem" / "big"
    big.mkdir(parents=True, exist_ok=True)
    f = big / "1gb.txt"
    if not f.exists() or f.stat().st_size < 1 << 30:
        line = b"lorem ipsum dolor sit amet, consectetur adipiscing elit\n"
        block = line * (1 << 20 // len(line) + 1)
        with open(f, "wb") as fh:
            while fh.tell() < 1 << 30:
                fh.write(block)
            fh.write(b"the needle\n")
    many = CACHE / "mem" / "many"
    if not (many / "done").exists():
        for i in range(500):
            d = many / f"d{i:03d}"
            d.mkdir(parents=True, exist_ok=True)
            for j in range(1000):
                (d / f"f{j:04d}.txt").write_bytes(b"x = %d\n" % j)
        (many / "done").write_text("")
    for name, root in (("1 GB file", big), ("500,000 files", many)):
        ws = Workspace(str(root))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t = time.perf_counter()
        cands = collect(ws, ws.root, True, None, ToolSettings())
        query = compile_query("needle", multiline=False, case_insensitive=False)
        args = GrepArgs(pattern="needle", output_mode="content")
        r = _search(PythonEngine(threads), query, cands.files, args, 0, ws.root)
        dt = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"{name}: python engine {dt:.1f} s, {len(cands.files)} files, "
              f"peak RSS {after / 1024:.0f} MiB (grew {(after - before) / 1024:.0f} MiB), "
              f"ok={r.ok}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="also run cold-cache cells (root only)")
    ap.add_argument("--trees", default="stdlib,linux")
    ap.add_argument("--memory", action="store_true")
    a = ap.parse_args()
    rg = find_rg()
    if rg is None:
        sys.exit("no rg found: run scripts/setup (the ripgrep wheel is in the dev extras)")
    print(f"rg: {rg}; python {sys.version.split()[0]}; cpus {os.cpu_count()}; "
          f"load {os.getloadavg()[0]:.1f}")
    if a.memory:
        memory(a.threads)
        return
    cold_ok = a.cold and drop_caches()
    if a.cold and not cold_ok:
        print("cold cells skipped: dropping the page cache needs root (/proc/sys/vm/drop_caches)")
    for tree in a.trees.split(","):
        if tree == "stdlib":
            bench_tree("stdlib", stdlib_tree(), a.threads, a.repeat, cold_ok, rg)
        elif tree == "linux":
            root = CACHE / "linux"
            if not root.is_dir():
                print("\n== linux: not prepared; run benchmarks/grep/prepare-kernel.sh first")
                continue
            bench_tree("linux", root.resolve(), a.threads, a.repeat, cold_ok, rg)


if __name__ == "__main__":
    main()
