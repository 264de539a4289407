"""Every benchmark runs once, on a tiny input, so none can rot; every one cited exists.

Speed is never asserted here (benchmarks/README.md): each script only has to run to
the end and print its table.  The fast ones run in seconds on inputs made small by their
own options; those that need a real part (a microVM boot, the vLLM CPU server) are
marked slow and run in CI like every real-component test.  A benchmark added without a
line in ``RUNS`` fails ``test_every_benchmark_has_a_tiny_run``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.vllm_server import URL_ENV, shared_vllm

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

# script -> (arguments for a tiny run, needs a real part that takes minutes: slow)
RUNS: dict[str, tuple[tuple[str, ...], bool]] = {
    "bundle/verify.py": (("1",), False),  # 1 MiB
    "dispatch/overhead.py": (("--calls", "3"), False),
    "grep/run.py": (("--trees", "stdlib", "--repeat", "1", "--patterns", "literal",
                     "--modes", "files_with_matches"), False),
    "grep/whole.py": (("--trees", "stdlib", "--git", "no", "--repeat", "1",
                       "--patterns", "literal"), False),
    "loop/bench_loop.py": (("2",), False),
    "policy/explain.py": (("--single", "1", "--batch-lines", "5", "--repeat", "1"), False),
    "probe/wall.py": (("--concurrency", "1", "--scripted-only", "--families", "wire"), False),
    "site/concurrent_sessions.py": (("--sessions", "1", "--turns", "1", "--server", "scripted"),
                                    False),
    "tui/first_frame.py": (("--runs", "1"), False),
    "tui/frames.py": (("--messages", "5", "--lines", "20", "--tps", "4000"), False),
    "tui/memory.py": (("--messages", "10"), False),
    "waits.py": (("--rows", "startup", "--repeat", "1"), False),
    # A real part: microVM boots (TCG here), the vLLM CPU server, a 256 MiB bundle and
    # the site-packages tree.  waits.py's kernel row needs benchmarks/grep/prepare-kernel.sh
    # (root, the kernel tree): it shares the grep row's code, run here.
    "sandbox/run.py": (("--commands", "1"), True),
    "sessions/bench_compaction.py": (("1",), True),
    "waits.py --rows grep,bundle,sandbox": (("--rows", "grep,bundle,sandbox", "--repeat", "1",
                                              "--bundle-mib", "8"), True),
}


# Benchmarks that drive the tiny model on the vLLM CPU server (tests/vllm_server.py).
USES_VLLM = {"sessions/bench_compaction.py"}


def _script(name: str) -> Path:
    return BENCH / name.split(" ")[0]


def test_every_benchmark_has_a_tiny_run() -> None:
    # A module whose name starts with "_" is a helper the benchmarks import, not one of them.
    scripts = {str(p.relative_to(BENCH)) for p in BENCH.rglob("*.py") if not p.name.startswith("_")}
    assert scripts == {name.split(" ")[0] for name in RUNS}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if slow else n
                                  for n, (_, slow) in RUNS.items()])
def test_the_benchmark_runs_on_a_tiny_input(name: str, tmp_path: Path) -> None:
    args, _ = RUNS[name]
    # Trees and generated data go to a fresh cache, never the developer's (~/.cache).
    env = {**os.environ, "ABHED_BENCH_CACHE": str(tmp_path / "cache"),
           "ABHED_HOME": str(tmp_path / "home")}
    if name in USES_VLLM:  # the suite's server, not a second one started by the child
        env[URL_ENV] = shared_vllm().base_url
    done = subprocess.run([sys.executable, str(_script(name)), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert done.stdout.strip(), "it printed no table"


# A path under benchmarks/ as docs, tests and code cite it: a script or a folder.
_CITED = re.compile(r"benchmarks/[A-Za-z0-9_./-]*[A-Za-z0-9_]")


def _citations() -> list[tuple[str, str]]:
    found = []
    places = [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md"), *(ROOT / "tests").rglob("*.py"),
              *(p for pkg in ("foundation", "appliance", "tools", "models", "bundle", "installer",
                              "tui", "cli", "scripts", "benchmarks") for p in (ROOT / pkg).rglob("*")
                if p.suffix in (".py", ".md", ".sh", "") and p.is_file())]
    for path in places:
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [(str(path.relative_to(ROOT)), m) for m in _CITED.findall(text)]
    return found


def test_every_cited_benchmark_exists() -> None:
    missing = sorted({(where, cited) for where, cited in _citations()
                      if not (ROOT / cited).exists()})
    assert missing == []
