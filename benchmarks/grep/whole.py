"""grep's whole call (walk + search + shaping) beside ``rg`` doing the same search with its own walk.

Usage (from the repository root):

    .venv/bin/python benchmarks/grep/whole.py [--trees stdlib,site,linux] [--git both|no|yes]
        [--repeat R] [--patterns literal,alternation,ci-literal]

Each cell runs ``tools.run_tool(Grep(), ...)`` in this process (what the agent's
dispatcher runs) with ``grep_engine`` forced to ``ripgrep`` and to ``python``,
in files_with_matches mode, and ``rg -l -j1 --no-require-git`` on the same
directory.  Both sides get one thread, so the comparison is about work, not
cores.  Times are medians of R runs; CPU is user+sys of this process and its
children (rg), steadier than wall time on a shared machine.  The ratio is
ours / rg, CPU.  ``rg -a`` is the same rg with ``--text``: plain rg stops
reading a file at its first NUL byte, while grep reads binary files through
to report how many would have matched, so on trees heavy with binaries
(site-packages: 106 of 157 MB are shared objects) ``rg -a`` is the like-for-like
reference.  Trees: ``stdlib`` and ``site`` (this venv's site-packages)
are hard-linked under ~/.cache/abhed-bench/grep (``$ABHED_BENCH_CACHE``), the
kernel tree comes from ``benchmarks/grep/prepare-kernel.sh``; ``--git yes``
runs in a copy that is a git work tree (``git init``, nothing committed: git
then lists every file as untracked, with its ignore rules), ``no`` outside git.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench import measure, need_rg  # noqa: E402

from tests.helpers import link_tree  # noqa: E402
from tools import ToolContext, ToolSettings, Workspace, run_tool  # noqa: E402
from tools.grep import Grep  # noqa: E402

CACHE = Path(os.environ.get("ABHED_BENCH_CACHE", Path.home() / ".cache" / "abhed-bench" / "grep"))
PATTERNS = {
    "literal": ("PyErr_SetString", "spin_lock_irqsave", False),
    "alternation": ("(TODO|FIXME|XXX)", "(TODO|FIXME|XXX)", False),
    "ci-literal": ("pyerr_setstring", "SPIN_LOCK_IRQSAVE", True),
}


def tree(name: str, git: bool) -> Path | None:
    if name == "stdlib":
        base = link_tree(sysconfig.get_paths()["stdlib"], CACHE / "stdlib")
    elif name == "site":
        base = link_tree(sysconfig.get_paths()["purelib"], CACHE / "site")
    else:
        base = CACHE / "linux"
        if not base.is_dir():
            return None
    if not git:
        return base.resolve()
    dst = CACHE / f"{name}-git"
    if not (dst / ".git").is_dir():
        if dst.exists():
            shutil.rmtree(dst)
        link_tree(str(base), dst) if name != "linux" else subprocess.run(
            ["cp", "-al", str(base), str(dst)], check=True)
        subprocess.run(["git", "init", "-q", str(dst)], check=True)
    return dst.resolve()


def run_cells(name: str, root: Path, git: bool, patterns: list[str], repeat: int, rg: str) -> None:
    nfiles = None
    for label in patterns:
        std, kern, ci = PATTERNS[label]
        pattern = kern if name == "linux" else std
        args = {"pattern": pattern, "case_insensitive": ci}
        res: dict[str, tuple[float, float]] = {}
        for engine in ("ripgrep", "python"):
            ctx = ToolContext(workspace=Workspace(str(root)),
                              settings=ToolSettings(grep_engine=engine))  # type: ignore[arg-type]
            out = run_tool(Grep(), args, ctx)
            assert out.ok, out.content
            nfiles = out.details["files_searched"]
            res[engine] = measure(lambda c=ctx, a=args: run_tool(Grep(), a, c), repeat)
        cmd = [rg, "--no-config", "--no-require-git", "-j1", "-l", "--hidden", "--no-messages"]
        cmd += (["-i"] if ci else []) + ["-e", pattern, str(root)]
        res["rg"] = measure(lambda cmd=cmd: subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False), repeat)
        # rg stops reading a file at its first NUL; grep must read binary files
        # through, to say how many would have matched: --text is the same work.
        text_cmd = cmd[:-3] + ["--text"] + cmd[-3:]
        res["rg-a"] = measure(
            lambda text_cmd=text_cmd: subprocess.run(text_cmd, stdout=subprocess.DEVNULL, check=False), repeat)
        rc, rw = res["rg"]
        print(f"{name:6} {'git' if git else 'no-git':6} {label:11} {nfiles:6} "
              f"{res['ripgrep'][0]:7.3f} {res['ripgrep'][0] / rc:5.2f}x "
              f"{res['python'][0]:7.3f} {res['python'][0] / rc:5.2f}x {rc:7.3f} "
              f"{res['rg-a'][0]:7.3f} {res['ripgrep'][0] / res['rg-a'][0]:5.2f}x "
              f"{res['python'][0] / res['rg-a'][0]:5.2f}x  "
              f"wall {res['ripgrep'][1]:6.3f} {res['python'][1]:6.3f} {rw:6.3f}  "
              f"load {os.getloadavg()[0]:4.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", default="stdlib,site,linux")
    ap.add_argument("--git", choices=["both", "no", "yes"], default="both")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--patterns", default="literal,alternation,ci-literal")
    a = ap.parse_args()
    rg = need_rg()
    print(f"grep whole call vs rg -l -j1 (CPU seconds, median of {a.repeat}); load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'tree':6} {'git':6} {'pattern':11} {'files':>6} {'rg-eng':>7} {'ratio':>6} "
          f"{'python':>7} {'ratio':>6} {'rg -j1':>7} {'rg -a':>7} {'rg-eng/a':>6} {'py/a':>6}")
    gits = {"both": [False, True], "no": [False], "yes": [True]}[a.git]
    for name in a.trees.split(","):
        for git in gits:
            root = tree(name, git)
            if root is None:
                print(f"{name}: not prepared; run benchmarks/grep/prepare-kernel.sh first")
                break
            run_cells(name, root, git, a.patterns.split(","), a.repeat, rg)


if __name__ == "__main__":
    main()
