"""The TUI's async tests run on asyncio through anyio's pytest plugin (a dependency of httpx)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
