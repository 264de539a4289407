"""Memory of the TUI over a long session, browsing it, and one 100 KB answer.

Feeds a headless app (no agent, collector tuned as ``abhed tui`` tunes it)
recorded exchanges: a prompt, a read call with a 20-line result, an answer
of a few Markdown paragraphs (3 messages each, plus notes).  RSS is read as
the app runs (no forced collection: what a person's terminal would see):

* after 100, 600, 1,000 ... MESSAGES messages;
* browsing: 25 times Ctrl+Home then Ctrl+End over the whole session, RSS
  before and after (issue 24: 92 MB grew to 251 MB and stayed);
* one answer of about 100 KB at the end, RSS before and after it is shown
  and after scrolling through it (issue 24: +44 MB).

    .venv/bin/python benchmarks/tui/memory.py [--messages 5000]
    .venv/bin/python benchmarks/tui/memory.py --messages 600 --against abdb69e   # side by side
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

from _side import ROOT, run_against, run_child, table, tune_gc_of  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def measure(root: Path, total: int) -> dict[str, Any]:
    sys.path.insert(0, str(root))
    import tui
    from tests.tui.helpers import INFO, fake_app, feed_turn

    tune_gc_of(tui)()
    app = fake_app()
    out = "".join(f"line {i}: some tool output here\n" for i in range(20))
    answer = ("The change is in `src/util.py`.\n\nIt adds **one** function and a test; the "
              "suite passes.\n\n- first point\n- second point\n")
    marks: dict[int, float] = {}
    result: dict[str, Any] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        app.sink.started(INFO)
        await pilot.pause()
        wanted = sorted(m for m in {100, 600, *range(1000, total, 1000), total} if m <= total)
        i = 0
        while len(app.transcript.entries) < total:
            feed_turn(app, f"prompt number {i}", tool="read", args={"path": f"/work/demo/f{i}.py"},
                      output=out, answer=answer)
            i += 1
            if i % 5 == 0:
                await pilot.pause()
            n = len(app.transcript.entries)
            for mark in wanted:
                if n >= mark and mark not in marks:
                    await pilot.pause(0.1)
                    marks[mark] = rss_mb()
        await pilot.pause(0.3)
        result["rss_session"] = rss_mb()
        for _ in range(25):
            await pilot.press("ctrl+home")
            await pilot.pause(0.05)
            await pilot.press("ctrl+end")
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        result["rss_browsed"] = rss_mb()
        before = rss_mb()
        long = "".join(f"Paragraph {k}: " + "some words of the answer " * 8 + "\n\n"
                       for k in range(500))
        feed_turn(app, "a long answer please", answer=long)
        await pilot.pause(0.5)
        result["rss_long_shown"] = rss_mb()
        for _ in range(120):
            await pilot.press("pageup")
        await pilot.press("ctrl+end")
        await pilot.pause(0.3)
        result["rss_long_scrolled"] = rss_mb()
        result["long_kb"] = len(long) / 1024
        result["long_delta"] = result["rss_long_scrolled"] - before
        t = app.transcript
        drawn = getattr(t, "_drawn", None)
        result["drawn"] = len(drawn) if drawn is not None else len(t.mounted())
        result["messages"] = len(t.entries)
    result["marks"] = marks
    result["browse_delta"] = result["rss_browsed"] - result["rss_session"]
    first, last = min(marks), max(marks)
    result["rss_first"], result["rss_last"] = marks[first], marks[last]
    result["per_message_kb"] = (marks[last] - marks[first]) * 1024 / max(1, last - first)
    return result


ROWS = [("RSS at 100 messages MB", "rss_first"), ("RSS at the end MB", "rss_last"),
        ("growth per message KB", "per_message_kb"),
        ("browsing 25x: RSS after MB", "rss_browsed"), ("browsing 25x: growth MB", "browse_delta"),
        ("100 KB answer: growth MB", "long_delta"), ("entries drawn at the end", "drawn")]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--against", default=None, help="a git revision to measure beside this tree")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    shared = ["--messages", str(a.messages)]
    if a.json:
        print(json.dumps(asyncio.run(measure(a.root, a.messages))))
        return
    before = run_against(a.against, HERE, shared) if a.against else None
    now = run_child(HERE, shared)
    print(f"{now['messages']:,} messages (120x40); load average {os.getloadavg()[0]:.1f}")
    for mark, mb in sorted(now["marks"].items(), key=lambda kv: int(kv[0])):
        print(f"  RSS after {int(mark):>6,} messages: {mb:7.1f} MB")
    table(ROWS, now, before, a.against or "")


if __name__ == "__main__":
    main()
