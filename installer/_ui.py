"""How the installer talks: progress on stderr, results on stdout, JSON when asked."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

__all__ = ["Progress", "emit_json", "out", "say"]


def say(msg: str) -> None:
    """A progress line on stderr (results go to stdout)."""
    sys.stderr.write(f"abhed-installer: {msg}\n")
    sys.stderr.flush()


def out(msg: str = "") -> None:
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()


class Progress:
    """Bytes and rate on stderr, at most twice a second."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.start = time.monotonic()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.5 and done < total:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-6) / (1 << 20)
        pct = 100 * done / total if total else 100
        sys.stderr.write(f"abhed-installer: {self.what}: {done / (1 << 20):.1f} / "
                         f"{total / (1 << 20):.1f} MiB ({pct:.0f}%, {rate:.1f} MiB/s)\n")
        sys.stderr.flush()
