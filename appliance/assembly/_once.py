"""Notes that matter once: said once per terminal session, recorded every session.

"No site settings apply" and "the shell runs under bubblewrap, not a microVM"
describe the installation, not the call: said before every ``abhed tool``
call they bury its output.  The rule, for every door that prints to a person
(``abhed run``, ``abhed tool``, the TUI): such a note is said the first time its
exact text comes up in a terminal session, then not again until the terminal
session changes or the text does (a new reason is news).  The event log is not
affected: a sandbox fallback is still recorded as a ``startup_notice`` in every
session, and every ``session_started`` still names the site layer (or none).

A terminal session is the controlling terminal (of stderr, else stdin or
stdout; ``-`` without one) with its session leader: its process id and its
start time, so a reused process id is a new session.  What was said is kept in
``ABHED_HOME/state/said-once.json`` (0600), for the 64 newest terminal sessions.
A file that cannot be read (or is over 256 KiB, or is not strict JSON) or written costs a
repeat, never a silence.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from appliance._home import abhed_home
from appliance.assembly._tooling import Notice
from foundation import FoundationError, read_document

__all__ = ["ONCE_KINDS", "first_in_terminal", "terminal_session", "to_say"]

#: Notice kinds that describe the installation; the others (an MCP server refused, an
#: extension dead, no sandbox at all) are a loss, said every time.
ONCE_KINDS = frozenset({"no_site_settings", "sandbox_fallback"})
_KEEP = 64
_MAX_BYTES = 1 << 18


def terminal_session() -> str:
    """``TTY|SID|START``: the terminal and its session leader (pid and start time)."""
    tty = "-"
    for fd in (2, 0, 1):
        try:
            if os.isatty(fd):
                tty = os.ttyname(fd)
                break
        except OSError:
            continue
    sid = os.getsid(0)
    try:
        with open(f"/proc/{sid}/stat", "rb") as fh:
            start = fh.read(4096).rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        start = "?"
    return f"{tty}|{sid}|{start}"


def _load(path: Path) -> dict[str, list[str]]:
    """What was said, by terminal session; an unreadable, oversized or malformed file (a
    duplicate key included: foundation's one reader) is nothing said."""
    try:
        data = read_document(path, what="said-once record", cap=_MAX_BYTES, syntax="json")
    except FoundationError:
        return {}
    return {k: [x for x in v if isinstance(x, str)] for k, v in data.items()
            if isinstance(v, list)}


def first_in_terminal(message: str) -> bool:
    """Whether ``message`` is new in this terminal session (and remember that it was said)."""
    path = abhed_home() / "state" / "said-once.json"
    key = hashlib.sha256(message.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    here = terminal_session()
    seen = _load(path)
    said = seen.pop(here, [])
    if key in said:
        return False
    seen[here] = (said + [key])[-50:]  # this session last: the oldest are dropped first
    while len(seen) > _KEEP:
        seen.pop(next(iter(seen)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(seen, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # not remembered: said again next time, the safe side
    return True


def to_say(notices: Iterable[Notice]) -> list[Notice]:
    """The notices a door prints now: every loss, and each once-note new to this terminal."""
    return [n for n in notices if n.kind not in ONCE_KINDS or first_in_terminal(n.message)]
