"""One process works a session at a time (appliance.Session.hold).

A second `abhed run --session` used to take the first one's unfinished run for a crash: it
marked the running command "outcome unknown" and ended the run as interrupted while that
process went on appending to it; an undo from another terminal put files back under a live run.
Now every door that opens a session for work is refused while another process holds it, and
the lock goes with its process, so a resume after kill -9 still works (test_long_session).
"""

from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from appliance import EventLogError, Session, events_db_path
from appliance.events import EventStore, RunEnded
from models.scripted import ScriptedServer, ScriptStep
from tests.appliance.helpers import abhed, write_config
from tests.helpers import wait_for


def _step(name: str, **args: object) -> ScriptStep:
    return ScriptStep.model_validate({"tool_calls": [{"name": name, "arguments": args}]})


@pytest.mark.slow
def test_a_session_another_process_is_running_is_refused_at_every_door(
        abhed_home: Path, workspace: Path) -> None:
    notes = workspace / "notes.txt"
    steps = [_step("write", path=str(notes), content="v1\n"), ScriptStep(text="written"),
             _step("read", path=str(notes)),
             _step("edit", path=str(notes), old_string="v1", new_string="v2"),
             _step("bash", command="touch started; for i in $(seq 600); do [ -e go ] && break; "
                   "sleep 0.1; done", description="a check that waits for the test"),
             ScriptStep(text="checked")]
    with ScriptedServer(steps) as server:
        write_config(abhed_home, server.base_url)
        conf = json.loads((abhed_home / "config.json").read_text())
        (abhed_home / "config.json").write_text(json.dumps({**conf, "sandbox": {"backend": "host"}}))
        first = abhed("run", "write the notes", "-w", str(workspace), "--mode", "auto")
        assert first.returncode == 0, first.stderr
        sid = re.search(r"session: (s-\S+)", first.stderr).group(1)  # type: ignore[union-attr]
        running = subprocess.Popen(
            [sys.executable, "-m", "cli", "run", "edit and check", "-w", str(workspace),
             "--mode", "auto", "--session", sid], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            wait_for(lambda: (workspace / "started").exists(), 60, what="the run's slow command")
            busy = f"session {sid} is in use by another process (pid {running.pid}, abhed run"
            second = abhed("run", "me too", "-w", str(workspace), "--mode", "auto", "--session", sid)
            assert second.returncode == 2 and busy in second.stderr, second.stderr
            undo = abhed("sessions", "undo", sid)
            assert undo.returncode == 1 and busy in undo.stderr, undo.stderr
            assert notes.read_text() == "v2\n"  # the live run's edit was not put back under it
            tool = abhed("tool", "read", json.dumps({"path": str(notes)}), "-w", str(workspace),
                         "--session", sid)
            assert tool.returncode == 2 and busy in tool.stderr, tool.stderr
            (workspace / "go").touch()
            _out, err = running.communicate(timeout=60)
        finally:
            if running.poll() is None:
                running.kill()
                running.communicate()
        assert running.returncode == 0, err
    store = EventStore(events_db_path())
    try:
        ended = [e.event for e in store.events(sid, types=("run_ended",))]
        outcomes = [e.event.result.ok for e in store.events(sid, types=("observation",))]
    finally:
        store.close()
    # Nobody recovered the live run as a crash: each run ended once, as itself.
    assert [e.reason for e in ended if isinstance(e, RunEnded)] == ["done", "done"]
    assert outcomes == [True, True, True, True]
    # Once it ended, the session is free again.
    undo = abhed("sessions", "undo", sid)
    assert undo.returncode == 0, undo.stderr
    assert notes.read_text() == "v1\n"


_OPEN_IN_ANOTHER_PROCESS = textwrap.dedent("""
    import sys
    from pathlib import Path
    from appliance import Session, SessionBusy
    from appliance.events import EventStore
    store = EventStore(Path(sys.argv[1]))
    try:
        Session.open(store, sys.argv[2])
    except SessionBusy as exc:
        print("busy:", exc)
    else:
        print("opened")
""")


def _other_process_opens(db: Path, sid: str) -> str:
    return subprocess.run([sys.executable, "-c", _OPEN_IN_ANOTHER_PROCESS, str(db), sid],
                          capture_output=True, text=True, timeout=60, check=True).stdout


def test_one_process_shares_its_hold_and_lets_go_when_done(tmp_path: Path) -> None:
    db = tmp_path / "events.db"
    store = EventStore(db)
    try:
        made = Session.create(store, str(tmp_path))
        sid = made.id
        # In this process its doors take turns already (rpc's undo beside its agent): shared.
        again = Session.open(store, made.id)
        made.release()
        assert _other_process_opens(db, made.id).startswith(
            f"busy: session {made.id} is in use by another process (pid ")
        again.release()
        again.release()  # a second release does nothing
        assert _other_process_opens(db, made.id) == "opened\n"
        # Held again after a release, and let go when the object is collected.
        again.hold()
        assert _other_process_opens(db, made.id).startswith("busy:")
        del again, made
        gc.collect()
        assert _other_process_opens(db, sid) == "opened\n"
    finally:
        store.close()


@pytest.mark.parametrize("hostile", ["../../escape", "a/b", "x" * 5000, "\x00nul", ".hidden", "ü"])
def test_a_hostile_session_id_never_names_a_lock_outside_the_locks_folder(
        tmp_path: Path, hostile: str) -> None:
    store = EventStore(tmp_path / "state" / "events.db")
    try:
        session = Session.create(store, str(tmp_path), session_id=hostile)
        locks = list((tmp_path / "state" / "locks").iterdir())
        assert len(locks) == 1 and locks[0].suffix == ".lock" and len(locks[0].name) < 140
        assert {p.name for p in (tmp_path / "state").iterdir()} >= {"events.db", "locks"}
        assert not (tmp_path / "escape.lock").exists() and not (tmp_path / "a").exists()
        session.release()
    finally:
        store.close()


def test_a_lock_folder_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "events.db")
    try:
        (tmp_path / "locks").write_text("a file where the folder goes")
        with pytest.raises(EventLogError, match="cannot take session .* for work: .*locks"):
            Session.create(store, str(tmp_path))
    finally:
        store.close()


def test_a_sessions_lock_file_lives_only_while_a_process_works_it(tmp_path: Path) -> None:
    """Each tool call is a session: their lock files once piled up in STATE/locks."""
    store = EventStore(tmp_path / "state" / "events.db")
    try:
        for _ in range(3):
            session = Session.create(store, str(tmp_path))
            assert len(list((tmp_path / "state" / "locks").iterdir())) == 1
            session.release()
        assert list((tmp_path / "state" / "locks").iterdir()) == []
        again = Session.open(store, session.id)  # a resume makes it anew
        assert _other_process_opens(tmp_path / "state" / "events.db", session.id).startswith(
            "busy:")
        again.release()
    finally:
        store.close()


def test_a_lock_file_removed_between_open_and_lock_is_not_taken_for_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the removal opens: this process opens the lock file, its last holder lets go
    (removes it) and another process makes and locks a new one, then this process's flock
    succeeds on the removed file.  It must see that the path is no longer its file, open it
    again, and find the session busy, never work it beside the other."""
    import fcntl
    import os

    import appliance._session as session_module

    store = EventStore(tmp_path / "state" / "events.db")
    try:
        made = Session.create(store, str(tmp_path))
        sid = made.id
        made.release()
        path = str(tmp_path / "state" / "locks" / f"{sid}.lock")
        real = fcntl.flock
        other: list[int] = []

        def racing(fd: int, op: int) -> None:
            if not other:  # between this open and this lock: the file is replaced and held
                Path(path).unlink(missing_ok=True)
                fd2 = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                real(fd2, fcntl.LOCK_EX)  # another open file description: another holder
                other.append(fd2)
            real(fd, op)

        monkeypatch.setattr(session_module.fcntl, "flock", racing)
        with pytest.raises(session_module.SessionBusy):
            Session.open(store, sid)
        os.close(other[0])
    finally:
        store.close()
