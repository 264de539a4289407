"""What several benchmarks measure with and build on, in one place: CPU time of this
process and its children, a median-of-runs timer, the bundle benchmarks' synthetic
model, and the grep benchmarks' ripgrep.  A helper the scripts import (its name starts with "_"), not a benchmark."""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path


def cpu_now() -> float:
    """CPU seconds (user + system) of this process, its threads and its waited-for children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def need_rg() -> str:
    """The ripgrep the grep tool would run (``tools.grep.find_rg``), or exit saying how to get it."""
    from tools.grep import find_rg

    rg = find_rg()
    if rg is None:
        sys.exit("no rg found: run scripts/setup (the ripgrep wheel is in the dev extras)")
    return rg


def measure(fn: Callable[[], object], repeat: int, warm: bool = True) -> tuple[float, float]:
    """(median CPU s, median wall s) of ``repeat`` calls; ``warm``: one uncounted call first
    (the page cache and the interpreter)."""
    if warm:
        fn()
    cpu, wall = [], []
    for _ in range(repeat):
        c, w = cpu_now(), time.perf_counter()
        fn()
        cpu.append(cpu_now() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def bundle_input(root: Path, size: int) -> Path:
    """A bundle spec under ``root`` whose one model ``m/weights.bin`` is ``size`` bytes, half
    random (incompressible) and half text-like (compressible), like weights and docs; the
    spec's path."""
    (root / "m").mkdir()
    text = (b"the quick brown fox jumps over the lazy dog %d\n" * 20000)[: 1 << 20]
    with open(root / "m" / "weights.bin", "wb") as f:
        f.writelines(os.urandom(1 << 20) if i % 2 else text for i in range(size >> 20))
    spec = root / "spec.json"
    spec.write_text(json.dumps({
        "format": "abhed-bundle-spec/1", "name": "bench", "version": 1,
        "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.36", "python": "3.11",
                     "accelerator": "cpu"},
        "model": [{"name": "m", "dir": "m", "licence": "none", "source": "bench"}]}))
    return spec
