"""Boot time and per-command round trip for each sandbox backend, side by side.

Run:  .venv/bin/python benchmarks/sandbox/run.py [--commands N] [--boots B] [--accel auto|kvm|tcg]

For each backend (microvm, bwrap, host) it measures:
  start   time from nothing to the first command being accepted (microvm: a
          full VM boot to the guest agent's hello; bwrap/host: creating the
          sandbox object, which is cheap since each command is its own sandbox);
  rt      the round trip of `true` through the sandbox's run() (median and p90
          over N commands), i.e. what one bash call costs beyond the command;
  tool    the same through the bash tool (run_tool: validation, output shaping);
and prints the ratios against the host backend.  The microVM uses the test
image (built and cached by bundle.image on first use).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from appliance.sandbox import BwrapSandbox, HostSandbox, MicroVM, SandboxSettings
from bundle.image import build_image, default_agent_source
from tools import ToolContext, Workspace, run_tool
from tools.bash import Bash


def _measure(make: Any, ws: str, n: int, boots: int) -> dict[str, Any]:
    accel = ""
    starts: list[float] = []
    rts: list[float] = []
    tools: list[float] = []
    for b in range(boots):
        t = time.perf_counter()
        box = make()
        if isinstance(box, MicroVM):
            box.boot()
            accel = box.accel or ""
        starts.append((time.perf_counter() - t) * 1000)
        try:
            if b == boots - 1:
                box.run("true", cwd=ws, env={}, timeout_s=60)  # warm-up
                for _ in range(n):
                    t = time.perf_counter()
                    box.run("true", cwd=ws, env={}, timeout_s=60)
                    rts.append((time.perf_counter() - t) * 1000)
                ctx = ToolContext(workspace=Workspace(ws), sandbox=box)
                tool = Bash()
                for _ in range(n):
                    t = time.perf_counter()
                    res = run_tool(tool, {"command": "true", "description": "bench"}, ctx)
                    tools.append((time.perf_counter() - t) * 1000)
                    assert res.ok, res.content
        finally:
            box.close()
    rts.sort()
    return {"start": statistics.median(starts), "rt": statistics.median(rts),
            "rt_p90": rts[int(len(rts) * 0.9) - 1] if len(rts) >= 2 else rts[0],
            "tool": statistics.median(tools), "accel": accel}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commands", type=int, default=20)
    parser.add_argument("--boots", type=int, default=1)
    parser.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"])
    args = parser.parse_args()
    settings = SandboxSettings(memory_mib=512, vcpus=1, accel=args.accel, boot_timeout_s=300)
    image = build_image("test", agent_source=default_agent_source())
    with tempfile.TemporaryDirectory(prefix="abhed-bench-") as ws:
        results: dict[str, dict[str, Any]] = {}
        for name, make in (("host", lambda: HostSandbox(ws, settings)),
                           ("bwrap", lambda: BwrapSandbox(ws, settings)),
                           ("microvm", lambda: MicroVM(ws, image, settings))):
            results[name] = _measure(make, ws, args.commands, args.boots)
    accel = results["microvm"]["accel"]
    host = results["host"]
    print(f"sandbox backends, {args.commands} commands each (microvm accel: {accel})")
    print(f"{'backend':8} {'start ms':>10} {'rt ms':>8} {'rt p90':>8} {'tool ms':>8} "
          f"{'rt / host':>10}")
    for name, r in results.items():
        print(f"{name:8} {r['start']:10.1f} {r['rt']:8.1f} {r['rt_p90']:8.1f} {r['tool']:8.1f} "
              f"{r['rt'] / host['rt']:10.1f}x")


if __name__ == "__main__":
    main()
