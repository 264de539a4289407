"""Notes that matter once are said once per terminal session (appliance.assembly._once).

Real processes: ``abhed tool read`` run three times, twice in this session and once
in a new one (``setsid``), against a real home; the state file damaged for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from appliance.compose import first_in_terminal, terminal_session

NOTE = "no site settings apply"


def _read(ws: Path, *, new_session: bool = False) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "cli", "tool", "read",
            json.dumps({"path": str(ws / "a.txt")}), "--workspace", str(ws)]
    return subprocess.run(["setsid", "--wait", *argv] if new_session else argv,
                          capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)


def test_the_site_note_is_said_once_per_terminal_session(workspace: Path, abhed_home: Path) -> None:
    (workspace / "a.txt").write_text("hello\n")
    first, second = _read(workspace), _read(workspace)
    assert first.returncode == second.returncode == 0, first.stderr
    assert NOTE in first.stderr and NOTE not in second.stderr
    assert '"ok":true' in second.stdout
    other = _read(workspace, new_session=True)  # another terminal session: news again
    assert other.returncode == 0 and NOTE in other.stderr
    state = json.loads((abhed_home / "state" / "said-once.json").read_text())
    assert len(state) == 2 and oct((abhed_home / "state" / "said-once.json").stat().st_mode)[-3:] == "600"


def test_a_damaged_memory_repeats_the_note_rather_than_hiding_it(abhed_home: Path) -> None:
    path = abhed_home / "state" / "said-once.json"
    assert first_in_terminal("note A") and not first_in_terminal("note A")
    assert first_in_terminal("note B")  # another text is news
    path.write_bytes(b"\x00garbage" * 1000)
    assert first_in_terminal("note A")
    path.write_text(json.dumps({terminal_session(): "not a list", "x": [1, 2]}))
    assert first_in_terminal("note A")
    said = path.read_text()  # now it holds note A for this terminal; each damage forgets it
    key = json.loads(said)[terminal_session()][0]
    # a duplicate key (whose last value, read leniently, would hide the note), cut short, and
    # over the cap (256 KiB): each is read as nothing said
    for damaged in (f'{{"{terminal_session()}": [], "{terminal_session()}": ["{key}"]}}',
                    said[:-1],
                    " " * (1 << 18) + said):
        path.write_text(damaged)
        assert first_in_terminal("note A"), damaged[:80]


def test_a_terminal_session_is_the_terminal_and_its_leader() -> None:
    tty, sid, start = terminal_session().split("|")
    assert int(sid) == os.getsid(0) and (start.isdigit() or start == "?")
    assert tty == "-" or tty.startswith("/dev/")
