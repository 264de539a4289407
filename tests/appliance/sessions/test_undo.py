"""undo: the last run's (or every run after N's) write/edit changes put back from preimages,
all or nothing, refusing a file changed since by name; bash not undone, and said so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
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


def test_a_fifo_put_where_the_file_was_is_refused_not_read_forever(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    sid = _two_runs(store, workspace)
    (workspace / "g.txt").unlink()
    os.mkfifo(workspace / "g.txt")  # opening it to hash it would wait for a writer for ever
    done: list[UndoApplied] = []
    t = threading.Thread(target=lambda: done.append(undo(Session.open(store, sid))), daemon=True)
    t.start()
    t.join(30)
    assert done, "undo opened the FIFO and waited for a writer"
    event = done[0]
    refused = {f.path.rsplit("/", 1)[1]: f.reason for f in event.files if f.action == "refused"}
    assert "no longer a regular file" in refused["g.txt"]
    # Overwriting it, as the advice says, replaces the FIFO without reading it.
    event = undo(Session.open(store, sid), overwrite=[str(workspace / "g.txt")])
    actions = {f.path.rsplit("/", 1)[1]: (f.action, f.reason) for f in event.files}
    assert actions["g.txt"][0] == "deleted" and "could not be kept" in actions["g.txt"][1]
    assert not (workspace / "g.txt").exists() and (workspace / "f.txt").read_text() == "two\n"


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


def _three_edits(store: EventStore, ws: Path) -> tuple[str, Path]:
    """Three runs, each changing f.txt once (one -> two -> three -> four); the second makes g."""
    f = ws / "f.txt"
    f.write_text("one\n")
    steps = [call("read", path=str(f)), call("edit", path=str(f), old_string="one", new_string="two"),
             {"text": "1"},
             call("edit", path=str(f), old_string="two", new_string="three"),
             call("write", path=str(ws / "g.txt"), content="made\n"), {"text": "2"},
             call("edit", path=str(f), old_string="three", new_string="four"), {"text": "3"}]
    with agent_on(store, ws, steps) as (agent, _, _seen):
        for prompt in ("a", "b", "c"):
            assert agent.run(prompt).ok
        return agent.session.id, f


def test_undo_after_undo_walks_back_and_redo_walks_forward(workspace: Path) -> None:
    from appliance.sessions import redo, undo_history

    store = EventStore(workspace.parent / "e.db")
    sid, f = _three_edits(store, workspace)
    g = workspace / "g.txt"
    os.chmod(g, 0o600)
    session = Session.open(store, sid)
    undo(session)
    assert f.read_text() == "three\n"
    undo(session)  # the second undo walks on to the second run, instead of refusing f.txt
    assert f.read_text() == "two\n" and not g.exists()
    undo(session)
    assert f.read_text() == "one\n"
    with pytest.raises(UndoError, match="undone already; a redo puts"):
        undo(session)
    assert undo_history(session).next_undo is None
    redo(session)
    assert f.read_text() == "two\n"
    redo(session)  # the created file comes back, with its mode
    assert f.read_text() == "three\n" and g.read_text() == "made\n"
    assert os.stat(g).st_mode & 0o777 == 0o600
    history = undo_history(session)
    assert history.next_undo == history.runs[1] and history.next_redo is not None
    undo(session)  # undo again after a redo: the same run as before
    assert f.read_text() == "two\n"
    redo(session)
    redo(session)
    assert f.read_text() == "four\n"
    with pytest.raises(UndoError, match="nothing to redo"):
        redo(session)
    kinds = [e.event.kind for e in store.events(sid, types=("undo_applied",))  # type: ignore[union-attr]
             ]
    assert kinds == ["undo", "undo", "undo", "redo", "redo", "undo", "redo", "redo"]


def test_a_refusal_says_how_to_go_on_and_that_advice_works(workspace: Path) -> None:
    from appliance.sessions import redo

    store = EventStore(workspace.parent / "e.db")
    sid, f = _three_edits(store, workspace)
    session = Session.open(store, sid)
    undo(session)
    f.write_text("a person's work\n")  # changed since the undo put it back
    refused = undo(session)
    [why] = [x.reason for x in refused.files if x.path == str(f)]
    assert f"--overwrite {f}" in why and f"--skip {f}" in why and "can be brought back" in why
    g = workspace / "g.txt"
    assert g.exists() and f.read_text() == "a person's work\n"  # all or nothing
    skipped = undo(session, skip=[str(f)])  # leave f alone, put back the rest
    assert {x.path: x.action for x in skipped.files} == {str(f): "skipped", str(g): "deleted"}
    redo(session)
    assert g.exists()
    undo(session, overwrite=[str(f)])
    assert f.read_text() == "two\n" and not g.exists()
    redo(session)  # the person's work was kept, and comes back
    assert f.read_text() == "a person's work\n"


def test_the_model_is_told_of_a_redo(workspace: Path) -> None:
    from appliance.sessions import redo

    store = EventStore(workspace.parent / "e.db")
    sid, f = _three_edits(store, workspace)
    undo(Session.open(store, sid))
    redo(Session.open(store, sid))
    with agent_on(store, workspace, [{"text": "ok"}], session_id=sid) as (agent, server, _seen):
        agent.run("again")
    sent = json.dumps(server.requests[0]["messages"])
    assert "undid your changes" in sent and "redid your changes" in sent


def test_cli_undo_redo_with_skip(workspace: Path, abhed_home: Path) -> None:
    store = EventStore(abhed_home / "state" / "events.db")
    sid, f = _three_edits(store, workspace)
    store.close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(ABHED), "sessions", *args], capture_output=True, text=True,
                              check=False, timeout=120)

    assert cli("undo", sid).returncode == 0 and f.read_text() == "three\n"
    f.write_text("mine\n")
    proc = cli("undo", sid)
    assert proc.returncode == 1 and f"--skip {f}" in proc.stdout
    proc = cli("undo", sid, "--skip", str(f))
    assert proc.returncode == 0 and "skipped" in proc.stdout and f.read_text() == "mine\n"
    proc = cli("redo", sid)
    assert proc.returncode == 0 and (workspace / "g.txt").exists()
    proc = cli("redo", sid, "--overwrite", str(f))
    assert proc.returncode == 0 and f.read_text() == "four\n"
    proc = cli("redo", sid)
    assert proc.returncode == 1 and "nothing to redo" in proc.stderr
    assert "redo: restored" in cli("show", sid).stdout


def test_a_file_whose_earlier_content_was_not_kept_can_be_skipped(workspace: Path) -> None:
    # A preimage is not kept over its bound or when it held a passage redaction removed.
    store = EventStore(workspace.parent / "e.db")
    sid, f = _three_edits(store, workspace)
    for blob in (workspace.parent / "artifacts" / sid).iterdir():
        blob.unlink()
    session = Session.open(store, sid)
    refused = undo(session)
    [why] = [x.reason for x in refused.files if x.path == str(f)]
    assert "was not kept" in why and f"--skip {f}" in why and f.read_text() == "four\n"
    skipped = undo(session, skip=[str(f)])  # the run is undone, that file left as it is
    assert [(x.path, x.action) for x in skipped.files] == [(str(f), "skipped")]
    assert f.read_text() == "four\n"


def test_undo_to_turn_zero_with_nothing_to_undo_exits_1_like_a_plain_undo(
        workspace: Path, abhed_home: Path) -> None:
    # The bug: `--to-turn 0` over runs that changed no file recorded an empty undo and exited
    # 0 ("nothing to undo: those runs changed no file"), while a plain undo and a second
    # `--to-turn 0` exited 1; --help says exit 1 when there is nothing to undo.
    store = EventStore(abhed_home / "state" / "events.db")
    steps = [call("bash", command="true", description="nothing"), {"text": "looked"},
             {"text": "answered"}]
    with agent_on(store, workspace, steps) as (agent, _, _seen):
        assert agent.run("first").ok and agent.run("second").ok
        sid = agent.session.id
    store.close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(ABHED), "sessions", "undo", sid, *args], capture_output=True,
                              text=True, check=False, timeout=120)

    for args in ((), ("--to-turn", "0"), ("--to-turn", "1")):
        proc = cli(*args)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert "nothing to undo" in proc.stderr and proc.stdout == ""
        assert ("1 bash calls ran" in proc.stderr) == (args != ("--to-turn", "1"))
    store = EventStore(abhed_home / "state" / "events.db")
    assert not list(store.events(sid, types=("undo_applied",)))  # no empty undo on the history
    store.close()
