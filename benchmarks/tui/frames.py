"""Frame time, typing echo and memory while a reply streams at the end of a long session.

Runs the real app headless (Textual's own compositor renders every frame;
the headless driver discards the bytes) on a link that starts no agent:
first MESSAGES messages of recorded exchanges (a prompt, a tool call with a
20-line result, a Markdown answer), then a reply streamed from a thread as a
provider would, at TPS tokens/s (about 4 characters a token): a short
paragraph and one fenced block of LINES lines.  Meanwhile a second thread
types a key into the message box KEYS_HZ times a second.

Measured: each frame (a render-clock tick plus the screen update after it;
CPU time of the UI thread by default, ``--wall`` for wall time), the typing
echo (wall time from a key's arrival to the end of the first screen update
that shows it; and, beside it, the UI thread's CPU time over the same span:
the work a key waits behind, which a loaded machine does not inflate by
time spent waiting for a core), and RSS (after the session is loaded, after
the reply, and the peak).  Goals: frame p95 16 ms (issue 24), typing echo
p95 30 ms (issue 33).

    .venv/bin/python benchmarks/tui/frames.py                      # this tree
    .venv/bin/python benchmarks/tui/frames.py --against abdb69e    # beside an older commit
    .venv/bin/python benchmarks/tui/frames.py --against 2a431f7 --together   # both at once
    .venv/bin/python benchmarks/tui/frames.py --messages 20 --lines 50 --seconds 2   # quick

``--against REV`` checks REV out in a temporary git worktree, runs the same
measurement there in a child process, and prints both side by side with
the ratios (before / now).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

from _side import ROOT, run_against, run_child, run_together, table, tune_gc_of  # noqa: E402

DEFAULT_ROOT = ROOT


def reply(lines: int) -> str:
    body = "".join(f"    let value_{i} = compute({i}, \"item {i}\");\n" for i in range(lines))
    return ("Here is the generated table module:\n\n```rust\nfn table() {\n" + body
            + "}\n```\n\nDone.\n")


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else 0.0


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def measure(root: Path, messages: int, lines: int, tps: float, keys_hz: float,
                  wall: bool) -> dict[str, Any]:
    sys.path.insert(0, str(root))
    from textual import events
    from textual.screen import Screen

    import tui
    from models import Delta
    from tests.tui.helpers import INFO, fake_app, feed_turn

    tune_gc_of(tui)()  # as run_tui does
    clock = time.perf_counter if wall else time.thread_time
    app = fake_app()
    frames: list[float] = []
    ticks: list[float] = []
    updates: list[float] = []
    echoes: list[float] = []
    last_tick = [0.0]
    posted: list[float] = []
    posted_cpu: list[float] = []  # the UI thread's CPU clock when each key was posted
    echoes_cpu: list[float] = []
    ui_clock = time.pthread_getcpuclockid(threading.get_ident())
    seen = [0]
    orig_tick = app._tick

    def timed_tick() -> None:
        t0 = clock()
        orig_tick()
        last_tick[0] += clock() - t0

    app._tick = timed_tick  # type: ignore[method-assign]
    orig_update = Screen._on_timer_update
    measuring = [False]

    def timed_update(self: Screen[Any]) -> None:
        t0 = clock()
        orig_update(self)
        if measuring[0]:
            updates.append(clock() - t0)
            ticks.append(last_tick[0])
            frames.append(clock() - t0 + last_tick[0])
            now = time.perf_counter()
            now_cpu = time.thread_time()
            typed = len(app.composer.text)
            while seen[0] < min(typed, len(posted), len(posted_cpu)):
                echoes.append(now - posted[seen[0]])
                echoes_cpu.append(now_cpu - posted_cpu[seen[0]])
                seen[0] += 1
        last_tick[0] = 0.0

    Screen._on_timer_update = timed_update  # type: ignore[method-assign]
    text = reply(lines)
    answer = ("The change is in `src/util.py`.\n\nIt adds **one** function and a test; the "
              "suite passes.\n\n- first point\n- second point\n")
    out = "".join(f"line {i}: some tool output here\n" for i in range(20))
    async with app.run_test(size=(120, 40)) as pilot:
        app.sink.started(INFO)
        await pilot.pause()
        i = 0
        while len(app.transcript.entries) < messages:
            feed_turn(app, f"prompt number {i}", tool="read",
                      args={"path": f"/work/demo/f{i}.py"}, output=out, answer=answer)
            i += 1
            if i % 10 == 0:
                await pilot.pause()
        await pilot.pause(0.3)
        loaded = rss_mb()
        feed_turn(app, "generate the table module")
        app.running = True
        assert app._clock_timer is not None
        app._clock_timer.resume()
        done = threading.Event()
        chars_per_s = tps * 4

        def provider() -> None:
            step = 0.01
            n = max(1, int(chars_per_s * step))
            start = time.perf_counter()
            for k in range(0, len(text), n):
                app.sink.delta(Delta(kind="text", text=text[k:k + n]))
                pause = start + (k // n + 1) * step - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
            done.set()

        def typist() -> None:
            while not done.is_set():
                time.sleep(1 / keys_hz)
                posted_cpu.append(time.clock_gettime(ui_clock))
                posted.append(time.perf_counter())
                app.post_message(events.Key("x", "x"))

        measuring[0] = True
        t0 = time.perf_counter()
        threading.Thread(target=provider, daemon=True).start()
        threading.Thread(target=typist, daemon=True).start()
        while not done.is_set():
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        took = time.perf_counter() - t0
        measuring[0] = False
        after = rss_mb()
        entries = len(app.transcript.entries)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ms = 1000
    return {
        "messages": entries, "reply_chars": len(text), "lines": lines, "streamed_s": took,
        "frames": len(frames), "frame_p50": statistics.median(frames) * ms if frames else 0,
        "frame_p95": pct(frames, 95) * ms, "frame_max": max(frames, default=0) * ms,
        "tick_p95": pct(ticks, 95) * ms, "update_p95": pct(updates, 95) * ms,
        "echoes": len(echoes), "echo_p50": statistics.median(echoes) * ms if echoes else 0,
        "echo_p95": pct(echoes, 95) * ms, "echo_max": max(echoes, default=0) * ms,
        "echo_cpu_p50": statistics.median(echoes_cpu) * ms if echoes_cpu else 0,
        "echo_cpu_p95": pct(echoes_cpu, 95) * ms, "echo_cpu_max": max(echoes_cpu, default=0) * ms,
        "typed": len(posted), "unechoed": len(posted) - len(echoes), "rss_loaded": loaded, "rss_after": after, "rss_peak": peak,
        "clock": "wall" if wall else "UI-thread CPU",
    }


ROWS = [("frame p50 ms", "frame_p50"), ("frame p95 ms", "frame_p95"), ("frame max ms", "frame_max"),
        ("  of which tick p95 ms", "tick_p95"), ("  screen update p95 ms", "update_p95"),
        ("frames drawn", "frames"), ("typing echo p50 ms", "echo_p50"),
        ("typing echo p95 ms", "echo_p95"), ("typing echo max ms", "echo_max"),
        ("  UI-thread CPU in echo p50 ms", "echo_cpu_p50"), ("  UI CPU in echo p95 ms", "echo_cpu_p95"),
        ("  UI CPU in echo max ms", "echo_cpu_max"),
        ("keys typed", "typed"), ("keys never echoed", "unechoed"), ("RSS loaded MB", "rss_loaded"),
        ("RSS after reply MB", "rss_after"), ("RSS peak MB", "rss_peak")]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=600)
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--tps", type=float, default=400)
    ap.add_argument("--keys-hz", type=float, default=10)
    ap.add_argument("--wall", action="store_true", help="frames in wall-clock time")
    ap.add_argument("--against", default=None, help="a git revision to measure beside this tree")
    ap.add_argument("--together", action="store_true",
                    help="with --against: measure both trees at the same time, not one after "
                    "the other (a noisy machine then loads both alike)")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    shared = ["--messages", str(a.messages), "--lines", str(a.lines), "--tps", str(a.tps),
              "--keys-hz", str(a.keys_hz)] + (["--wall"] if a.wall else [])
    if a.json:
        result = asyncio.run(measure(a.root, a.messages, a.lines, a.tps, a.keys_hz, a.wall))
        print(json.dumps(result))
        return
    if a.against and a.together:
        now, before = run_together(a.against, HERE, shared)
    else:
        before = run_against(a.against, HERE, shared) if a.against else None
        now = run_child(HERE, shared)
    print(f"session of {now['messages']:,} messages, then a {now['lines']:,}-line fence "
          f"({now['reply_chars']:,} chars) streamed in {now['streamed_s']:.1f} s; frames in "
          f"{now['clock']} time; load average {os.getloadavg()[0]:.1f}")
    table(ROWS, now, before, a.against or "")


if __name__ == "__main__":
    main()
