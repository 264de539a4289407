"""undo: the last run's (or every run after N's) write/edit changes put back from preimages,
all or nothing, refusing a file changed since by name; bash not undone, and said so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from appliance._session import Session
from appliance.events import EventStore, UndoApplied
from appliance.sessions import UndoError, undo
from tests.appliance.sessions.helpers import agent_on, call

ABHED = Path(sys.executable).parent / "abhed"


def _two_runs(store: EventStore, ws: Path) -> str:
    f, g = ws / "f.txt", ws / "g.txt"
    f.write_text("one\n")
    steps = [call("read", path=str(f)), call("edit", path=str(f), old_string="one", new_string="two"),
             {"text": "edited"},
             call("edit", path=str(f), old_string="two", new_string="three"),
             call("write", path=str(g), content="new file\n"),
             call("bash", command="true", description="nothing"), {"text": "more"}]
    with agent_on(store, ws, steps) as (agent, _, _seen):
        assert agent.run("first").ok
        assert agent.run("second").ok
        return agent.session.id


def test_undo_restores_the_last_run_and_says_bash_is_not_undone(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    sid = _two_runs(store, workspace)
    assert (workspace / "f.txt").read_text() == "three\n" and (workspace / "g.txt").exists()
    event = undo(Session.open(store, sid))
    assert (workspace / "f.txt").read_text() == "two\n" and not (workspace / "g.txt").exists()
    assert sorted((f.path.rsplit("/", 1)[1], f.action) for f in event.files) == [
        ("f.txt", "restored"), ("g.txt", "deleted")]
    assert event.bash_calls_not_undone == 1
    assert isinstance(list(store.events(sid))[-1].event, UndoApplied)


def test_undo_to_turn_zero_undoes_every_run(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    sid = _two_runs(store, workspace)
    undo(Session.open(store, sid), after_turn=0)
    assert (workspace / "f.txt").read_text() == "one\n"


def test_a_file_changed_since_is_refused_by_name_and_nothing_is_restored(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    sid = _two_runs(store, workspace)
    (workspace / "g.txt").write_text("someone's work\n")
    event = undo(Session.open(store, sid))
    refused = {f.path.rsplit("/", 1)[1]: f.reason for f in event.files if f.action == "refused"}
    assert "changed since" in refused["g.txt"]
    assert (workspace / "g.txt").read_text() == "someone's work\n"
    assert (workspace / "f.txt").read_text() == "three\n"  # all or nothing


def test_the_model_is_told_and_must_read_again(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    sid = _two_runs(store, workspace)
    undo(Session.open(store, sid))
    f = workspace / "f.txt"
    steps = [call("edit", path=str(f), old_string="two", new_string="2"), {"text": "ok"}]
    with agent_on(store, workspace, steps, session_id=sid) as (agent, server, seen):
        agent.run("again")
    assert "undid your changes" in json.dumps(server.requests[0]["messages"])
    obs = [e.event for e in seen if e.event.type == "observation"]
    assert obs[0].result.error is not None and obs[0].result.error.code == "file_changed"  # type: ignore[union-attr]


def test_bad_turns_and_empty_sessions(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    empty = Session.create(store, str(workspace), version="t")
    with pytest.raises(UndoError, match="no runs"):
        undo(empty)
    sid = _two_runs(store, workspace)
    for bad in (-1, 2, 10**9):
        with pytest.raises(UndoError, match="between 0 and 1"):
            undo(Session.open(store, sid), after_turn=bad)


def test_cli_undo(workspace: Path, abhed_home: Path) -> None:
    store = EventStore(abhed_home / "state" / "events.db")
    sid = _two_runs(store, workspace)
    store.close()
    proc = subprocess.run([str(ABHED), "sessions", "undo", sid], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "restored" in proc.stdout and "1 bash calls ran" in proc.stdout
    proc = subprocess.run([str(ABHED), "sessions", "show", sid], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0 and "user:\n         first" in proc.stdout
    assert "model:\n         edited" in proc.stdout and "undo: restored 2 files" in proc.stdout
    proc = subprocess.run([str(ABHED), "sessions", "undo", "s-nope"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 1 and "s-nope" in proc.stderr
