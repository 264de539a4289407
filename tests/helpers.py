"""Helpers every test folder may use: waiting on a condition with a deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout_s: float = 30.0, *, poll_s: float = 0.02,
             what: str = "condition") -> T:
    """Poll ``cond`` until it returns something truthy; return that value.

    Tests never sleep for a fixed time (a slow CI machine makes that flaky, a
    fast one makes it wasteful): they wait on a condition, and a deadline turns
    "never" into a clear failure instead of a hung suite.
    """
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        pause.wait(poll_s)
