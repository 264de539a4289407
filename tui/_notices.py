"""What start-up said, and which of it the person has heard already.

A degradation (bubblewrap instead of a microVM, a development checkout with
no site settings) is said the first time it happens for this reason, then
only by the status line and /sandbox; a loss (no sandbox at all, an MCP
server refused, an extension dead) is said in red at every start.  "Heard
already" is remembered per user in ``ABHED_HOME/state/tui-notices.json``
(0600): a table ``{"seen": [key, ...]}`` of hashed notices, read with the
strict loader every state file uses.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui._link import LinkInfo

__all__ = ["first_time", "setup_notes"]

STATE_FILE = "tui-notices.json"
KEEP = 200  # notices remembered; the oldest are forgotten (and said once more)
MAX_STATE_BYTES = 64 * 1024


def setup_notes(info: LinkInfo) -> list[tuple[str, bool]]:
    """The notes to add for this start, each ``(text, error)``, in the order start-up said them."""
    out: list[tuple[str, bool]] = []
    for notice in info.notices:
        if notice.degraded_only:
            if first_time(notice.message):
                again = "; /sandbox says it again" if notice.kind.startswith("sandbox") else ""
                out.append((f"note: {notice.message} (said once{again})", False))
            continue
        out.append((notice.message, True))
    return out


def first_time(notice: str) -> bool:
    """Whether this notice is new to this user; it is remembered as heard from now on.

    A state file that is missing, unreadable or malformed counts as empty: the
    notice is said again, which is the safe side.
    """
    # pydantic (under foundation) and the appliance are loaded by now: this runs once the
    # agent has started, never before the first frame.
    from pydantic import BaseModel, ConfigDict

    from appliance import abhed_home
    from foundation import FoundationError, parse_document, read_regular, validate_document

    class Seen(BaseModel):
        model_config = ConfigDict(extra="forbid")
        seen: list[str] = []

    path = abhed_home() / "state" / STATE_FILE
    key = hashlib.sha256(notice.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    what = "the TUI's record of notes said once"
    try:
        raw = parse_document(read_regular(path, MAX_STATE_BYTES, what), what=what, source=path)
        seen = validate_document(raw, Seen, what=what, source=path).seen
    except FoundationError:
        seen = []
    if key in seen:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"seen": (seen + [key])[-KEEP:]}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # not remembered: said again next time, which is the safe side
    return True
