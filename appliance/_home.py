"""Where Abhed keeps config and state: ``ABHED_HOME``, default ``~/.abhed``.

Nothing is created at import time; callers ask for a path and create it
when they are about to write.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["abhed_home", "events_db_path"]


def abhed_home() -> Path:
    env = os.environ.get("ABHED_HOME")
    return Path(env).expanduser() if env else Path.home() / ".abhed"


def events_db_path(home: Path | None = None) -> Path:
    return (home or abhed_home()) / "state" / "events.db"
