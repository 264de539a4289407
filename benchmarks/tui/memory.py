"""Memory after 5,000 messages against after 100: the transcript's widget window at work.

Feeds a headless app (no agent) recorded exchanges: a prompt, a tool call
with a 20-line result, an answer of a few Markdown paragraphs (4 messages
each), and reads the process RSS after 100 and after 5,000 messages (after a
garbage collection, the app idle).  Issue 13's target: a few MB apart.

    .venv/bin/python benchmarks/tui/memory.py [--messages 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.tui.helpers import INFO, fake_app, feed_turn  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


async def main(total: int) -> None:
    app = fake_app()
    out = "".join(f"line {i}: some tool output here\n" for i in range(20))
    answer = ("The change is in `src/util.py`.\n\nIt adds **one** function and a test; the "
              "suite passes.\n\n- first point\n- second point\n")
    marks: dict[int, float] = {}
    first = min(100, total)  # the baseline (a tiny run, as tests/test_benchmarks.py makes, has fewer)
    async with app.run_test(size=(120, 40)) as pilot:
        app.sink.started(INFO)
        await pilot.pause()
        n = 0
        i = 0
        while n < total:
            feed_turn(app, f"prompt number {i}", tool="read", args={"path": f"/work/demo/f{i}.py"},
                      output=out, answer=answer)
            i += 1
            if i % 5 == 0:
                await pilot.pause()
            n = len(app.transcript.entries)
            for mark in (first, *range(1000, total, 1000), total):
                if n >= mark and mark not in marks:
                    await pilot.pause()
                    await pilot.pause()
                    n = len(app.transcript.entries)
                    gc.collect()
                    marks[mark] = rss_mb()
        # One widget draws the whole transcript; only entries near the screen keep lines.
        drawn = sum(1 for entry in app.transcript.entries if entry.drawn)
        await pilot.pause()
    print(f"messages in the transcript: {n:,}; holding drawn lines at the end: {drawn}")
    for mark, mb in sorted(marks.items()):
        print(f"RSS after {mark:>6,} messages: {mb:7.1f} MB")
    print(f"difference: {marks[total] - marks[first]:+.1f} MB "
          f"({(marks[total] - marks[first]) * 1024 / max(1, total - first):.2f} KB per message)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=5000)
    asyncio.run(main(ap.parse_args().messages))
