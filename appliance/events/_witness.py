"""The engineer's side of the head witness: posting this log's head, checking the inbox takes one.

A store whose settings name ``events.witness_dir`` drops its head into the
witness inbox whenever it closes after appending, and refuses new work while the
inbox cannot take one.  The witness's layout, its collector and its checker are
the event log's maintenance (:mod:`appliance.events.maintenance`, ``abhed events
witness collect`` and ``abhed events verify --witness``); this side is kept apart
so that a tool call on a shared host does not load them.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from pathlib import Path

from appliance._errors import EventLogError

__all__ = ["check_inbox", "post_head"]


def post_head(witness: Path, log: Path, seq: int, digest: str) -> None:
    """Drop this log's head into the witness inbox (O_EXCL: never overwrites anything)."""
    name = f"{os.getuid()}-{time.time_ns()}-{secrets.token_hex(4)}.head"
    body = json.dumps({"log": str(log.absolute()), "seq": seq, "hash": digest,
                       "host": socket.gethostname(),
                       "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    try:
        fd = os.open(witness / "inbox" / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                     0o444)
        try:
            os.write(fd, body.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise EventLogError(
            f"cannot post the log's head to the witness {witness}/inbox: {exc.strerror or exc}. "
            "Ask the administrator to set the inbox up (owner: the service account, mode 1733), "
            "or remove events.witness_dir from config.json.") from None


def check_inbox(witness: Path) -> None:
    """Refuse to start work when the configured witness cannot take a head."""
    inbox = witness / "inbox"
    if not os.access(inbox, os.W_OK | os.X_OK):
        raise EventLogError(
            f"the witness inbox {inbox} is missing or not writable by you: heads of this log "
            "could not be witnessed. Ask the administrator to set it up (owner: the service "
            "account, mode 1733), or remove events.witness_dir from config.json.")
