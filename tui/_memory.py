"""Give freed memory back to the system after a burst of drawing.

Drawing a long answer or paging through a long session makes and drops many
small objects; Python frees them, but glibc's allocator keeps the freed heap
pages mapped, so the process's RSS stays where the burst took it (a 100 KB
answer: +17 MB that never went down, of which 3 MB were still in use).
``malloc_trim(0)`` returns those pages.  The app calls :func:`trim` once the
screen is quiet after such a burst (never while a reply streams), so what a
person sees in ``top`` is what the TUI holds: the session's text, what is on
screen and a fixed margin.  Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["trim"]

_TRIM: object = None


def trim() -> bool:
    """Return freed heap memory to the system; False where the C library cannot."""
    global _TRIM
    if _TRIM is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _TRIM = libc.malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM is False:
        return False
    try:
        _TRIM(0)  # type: ignore[operator]
    except Exception:
        return False
    return True
