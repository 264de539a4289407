"""The doors that stand above the runtime: ``abhed acp`` (Abhed in the engineer's editor).

Nothing below a door imports it (tests/test_boundaries.py).
"""

from __future__ import annotations

__all__: list[str] = []
