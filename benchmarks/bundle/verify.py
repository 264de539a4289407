"""Benchmark: bundle verify vs `sha256sum`, and build vs `zstd`, on a synthetic bundle.

    .venv/bin/python benchmarks/bundle/verify.py [SIZE_MIB]   # default 2048 (2 GiB)

Prints seconds and the two ratios the issues ask for: verify / sha256sum over
the same bundle file (target <= 1.2), and build / `zstd -3 -T1` over the same
input (building should be bound by compression; issue 16: <= 1.5), in wall
time and in CPU time (user+sys of this process and its children, steadier on a
shared machine; the build's zstd workers count in it).  Not collected by pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bundle import SecretKey, TrustPolicy, build_bundle, verify_bundle
from models.bundle_kit import BUNDLE_KIT

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _bench import bundle_input, cpu_now

CPU: dict[str, float] = {}


def _time(fn: object, label: str = "") -> float:
    start, cpu = time.perf_counter(), cpu_now()
    fn()  # type: ignore[operator]
    CPU[label] = cpu_now() - cpu
    return time.perf_counter() - start


def main() -> None:
    size = int(sys.argv[1]) * 2**20 if len(sys.argv) > 1 else 2 * 2**30
    key = SecretKey.generate()
    trust = TrustPolicy(keys=(key.public_key(),))
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        root = Path(tmp)
        spec = bundle_input(root, size)  # half random, half text-like: like weights + docs
        out = root / "b.abhed"
        zstd = _time(lambda: subprocess.run(["zstd", "-q", "-3", "-T1", "-f", "-o",
                                             str(root / "w.zst"), str(root / "m" / "weights.bin")],
                                            check=True), "zstd")
        build = _time(lambda: build_bundle(spec, out, [key], model_kit=BUNDLE_KIT), "build")
        subprocess.run(["cat", str(out)], stdout=subprocess.DEVNULL, check=True)  # warm cache
        sha = _time(lambda: subprocess.run(["sha256sum", str(out)], stdout=subprocess.DEVNULL,
                                           check=True))
        verify = _time(lambda: verify_bundle(out, trust))
        print(f"bundle {out.stat().st_size / 2**20:.0f} MiB (input {size / 2**20:.0f} MiB)")
        print(f"sha256sum {sha:.2f} s   verify {verify:.2f} s   ratio {verify / sha:.2f} "
              "(target <= 1.2)")
        print(f"zstd -3 -T1 {zstd:.2f} s   build {build:.2f} s   ratio {build / zstd:.2f} (wall)")
        print(f"zstd -3 -T1 {CPU['zstd']:.2f} s   build {CPU['build']:.2f} s   ratio "
              f"{CPU['build'] / CPU['zstd']:.2f} (CPU, user+sys; target <= 1.5)   load "
              f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
