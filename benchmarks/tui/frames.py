"""Frame time while the model streams a 2,000-line code fence at 400 tokens/s.

Runs the real app headless (Textual's own compositor renders every frame;
the headless driver discards the bytes) on a link that starts no agent, and
feeds the app's sink from a thread as a provider would: 400 tokens/s, about
4 characters a token, a short paragraph then one fenced block of LINES lines.
Times each tick of the app's render clock (drain the deltas, freeze finished
blocks, re-render the tail) and each screen update (layout, compositor, the
write), and prints p50/p95/max of both and of a whole frame (a tick plus the
screen update after it).  Issue 13's target: frame p95 under 16 ms.

    .venv/bin/python benchmarks/tui/frames.py [--lines 2000] [--tps 400] [--naive] [--wall]

``--naive`` swaps the frozen-block renderer for the approach the anchors warn
about (re-render the whole reply as one Markdown on every tick), to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from textual.screen import Screen  # noqa: E402

from models import Delta  # noqa: E402
from tests.tui.helpers import (  # noqa: E402
    INFO,
    AssistantBlock,
    fake_app,
    feed_turn,
    markdown,
    tune_gc,
)


def reply(lines: int) -> str:
    body = "".join(f"    let value_{i} = compute({i}, \"item {i}\");\n" for i in range(lines))
    return "Here is the generated table module:\n\n```rust\nfn table() {\n" + body + "}\n```\n\nDone.\n"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else 0.0


async def main(lines: int, tps: float, naive: bool, wall: bool = False) -> None:
    # CPU time of the UI thread by default: on a shared, loaded machine wall time mostly
    # measures the other processes; --wall gives the wall-clock figure as well.
    clock = time.perf_counter if wall else time.thread_time
    tune_gc()  # as run_tui does
    app = fake_app()
    ticks: list[float] = []
    updates: list[float] = []
    frames: list[float] = []
    last_tick = [0.0]
    orig_tick = app._tick

    def timed_tick() -> None:
        t0 = clock()
        orig_tick()
        last_tick[0] = clock() - t0
        ticks.append(last_tick[0])

    app._tick = timed_tick  # type: ignore[method-assign]
    orig_update = Screen._on_timer_update

    def timed_update(self: Screen[Any]) -> None:
        t0 = clock()
        orig_update(self)
        dt = clock() - t0
        updates.append(dt)
        frames.append(dt + last_tick[0])
        last_tick[0] = 0.0

    Screen._on_timer_update = timed_update  # type: ignore[method-assign]
    if naive:
        def naive_tick(self: AssistantBlock) -> None:
            if self._dirty and self.is_mounted:
                self._dirty = False
                self._tail.update(markdown(self.text))
        AssistantBlock.tick = naive_tick  # type: ignore[method-assign]

    text = reply(lines)
    chars_per_s = tps * 4
    async with app.run_test(size=(120, 40)) as pilot:
        app.sink.started(INFO)
        await pilot.pause()
        feed_turn(app, "generate the table module")
        app.running = True
        assert app._clock_timer is not None
        app._clock_timer.resume()
        done = threading.Event()

        def provider() -> None:
            step = 0.01
            n = max(1, int(chars_per_s * step))
            start = time.perf_counter()
            for i in range(0, len(text), n):
                app.sink.delta(Delta(kind="text", text=text[i:i + n]))
                target = start + (i // n + 1) * step
                pause = target - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
            done.set()

        t0 = time.perf_counter()
        threading.Thread(target=provider, daemon=True).start()
        while not done.is_set():
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        took = time.perf_counter() - t0
    ms = 1000
    print(f"reply: {len(text):,} chars, a {lines:,}-line fence, at {tps:g} tokens/s "
          f"({chars_per_s:g} chars/s), streamed in {took:.1f} s; {'wall' if wall else 'UI-thread CPU'} time; renderer: "
          f"{'naive (whole reply re-rendered)' if naive else 'frozen blocks + tail'}")
    print(f"{'':22}{'n':>6}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for name, xs in (("render-clock tick", ticks), ("screen update", updates), ("frame", frames)):
        print(f"{name:22}{len(xs):>6}{statistics.median(xs) * ms if xs else 0:>9.2f}"
              f"{pct(xs, 95) * ms:>9.2f}{max(xs, default=0) * ms:>9.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--tps", type=float, default=400)
    ap.add_argument("--naive", action="store_true")
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of CPU time")
    a = ap.parse_args()
    asyncio.run(main(a.lines, a.tps, a.naive, a.wall))
