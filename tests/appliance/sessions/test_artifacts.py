"""Cut output is kept, not lost: whole outputs and preimages as session artifacts, paged with
read, recorded by digest, bounded on disk, and never another session's."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from appliance import Dispatcher, Session
from appliance.events import EventStore, ObservationEvent
from appliance.policy import Gate
from appliance.sandbox import BwrapSandbox, HostSandbox
from appliance.sessions import ArtifactStore
from tools import ARTIFACT_PREFIX, ToolContext, ToolSettings, Workspace, native_tools


@pytest.fixture
def store(workspace: Path) -> EventStore:
    return EventStore(workspace.parent / "state" / "events.db")


def _dispatcher(store: EventStore, workspace: Path, sandbox: object = None) -> Dispatcher:
    session = Session.create(store, str(workspace), version="test")
    ctx = ToolContext(workspace=Workspace(str(workspace), ToolSettings().secret_paths), ledger=session,
                      artifacts=ArtifactStore.beside(store.path, session.id),
                      sandbox=sandbox)  # type: ignore[arg-type]
    return Dispatcher(session, native_tools(), ctx, Gate.permissive())


def _observations(store: EventStore, sid: str) -> list[ObservationEvent]:
    return [e.event for e in store.events(sid, types=("observation",))
            if isinstance(e.event, ObservationEvent)]


def test_keep_is_by_digest_deduplicated_and_bounded(tmp_path: Path) -> None:
    a = ArtifactStore(tmp_path, "s-1", max_artifact_bytes=100, max_session_bytes=150)
    ref = a.keep(b"x" * 80, kind="output")
    assert ref is not None and ref["sha256"] == hashlib.sha256(b"x" * 80).hexdigest()
    assert ref["ref"] == ARTIFACT_PREFIX + ref["sha256"] and ref["bytes"] == 80
    assert a.keep(b"x" * 80, kind="output") == ref  # stored once
    assert a.used_bytes() == 80
    assert a.keep(b"y" * 101, kind="output") is None  # one blob over its bound
    assert a.keep(b"z" * 90, kind="output") is None  # the session over its bound
    src = tmp_path / "src.txt"
    src.write_bytes(b"from a file")
    by_path = a.keep(path=str(src), kind="preimage", source="/ws/src.txt")
    assert by_path is not None and a.find(by_path["ref"]) == (str(a.dir / by_path["sha256"]), "/ws/src.txt", "preimage")


def test_refs_resolve_only_to_the_sessions_own_blobs(tmp_path: Path) -> None:
    mine, theirs = ArtifactStore(tmp_path, "s-mine"), ArtifactStore(tmp_path, "s-theirs")
    ref = theirs.keep(b"secret build log", kind="output")
    assert ref is not None
    assert mine.find(ref["ref"]) is None
    for hostile in ["abhed:artifact/../s-theirs/" + ref["sha256"], "abhed:artifact/" + "0" * 64,
                    "abhed:artifact/", "abhed:artifact/" + ref["sha256"].upper(), "/etc/passwd",
                    "abhed:artifact/" + ref["sha256"] + "/x", "abhed:artifact/" + "a" * 100_000]:
        assert mine.find(hostile) is None and theirs.find(hostile) is None, hostile
    with pytest.raises(ValueError):
        ArtifactStore(tmp_path, "../escape")


def test_read_pages_an_artifact_and_refuses_a_foreign_one(store: EventStore, workspace: Path) -> None:
    d = _dispatcher(store, workspace)
    assert d.ctx.artifacts is not None
    ref = d.ctx.artifacts.keep("".join(f"line {n}\n" for n in range(1, 5001)).encode(), kind="output")
    assert ref is not None
    page = d.call("read", {"path": ref["ref"], "offset": 2500, "limit": 3})
    assert page.ok, page.content
    assert page.content.splitlines()[:3] == ["  2500\tline 2500", "  2501\tline 2501",
                                             "  2502\tline 2502"], page.content
    assert "file_state" not in page.details  # not a workspace file: nothing for the ledger
    other = _dispatcher(store, workspace)
    res = other.call("read", {"path": ref["ref"]})
    assert not res.ok and res.error is not None and res.error.code == "not_found"


def test_a_preimage_of_a_secret_path_is_refused_like_the_file(store: EventStore, workspace: Path) -> None:
    d = _dispatcher(store, workspace)
    assert d.ctx.artifacts is not None
    ref = d.ctx.artifacts.keep(b"TOKEN=1\n", kind="preimage", source=str(workspace / ".env"))
    assert ref is not None
    res = d.call("read", {"path": ref["ref"]})
    assert not res.ok and res.error is not None and res.error.code == "secret_path"


def test_edit_and_write_keep_the_preimage_recorded_by_digest(store: EventStore, workspace: Path) -> None:
    f = workspace / "a.py"
    f.write_text("x = 1\n")
    d = _dispatcher(store, workspace)
    d.call("read", {"path": str(f)})
    assert d.call("edit", {"path": str(f), "old_string": "x = 1", "new_string": "x = 2"}).ok
    assert d.call("write", {"path": str(f), "content": "x = 3\n"}).ok
    obs = _observations(store, d.session.id)
    kept = [a for o in obs for a in o.artifacts]
    assert [(a.kind, a.source) for a in kept] == [("preimage", str(f))] * 2
    assert kept[0].sha256 == hashlib.sha256(b"x = 1\n").hexdigest()
    assert kept[1].sha256 == hashlib.sha256(b"x = 2\n").hexdigest()
    assert d.ctx.artifacts is not None and d.ctx.artifacts.find(ARTIFACT_PREFIX + kept[0].sha256)


@pytest.mark.parametrize("lines", [10_000, 200_000])  # whole in head+tail; spilled to a file
def test_cut_bash_output_is_kept_whole_and_paged_without_rerunning(
        store: EventStore, workspace: Path, lines: int) -> None:
    box = HostSandbox(str(workspace))
    try:
        d = _dispatcher(store, workspace, box)
        res = d.call("bash", {"command": f"seq 1 {lines}", "description": "count"})
        assert res.ok and res.truncated
        [art] = res.details["artifacts"]
        assert art["ref"] in res.content and "Do NOT re-run" in res.content
        whole = "".join(f"{n}\n" for n in range(1, lines + 1)).encode()
        assert art["sha256"] == hashlib.sha256(whole).hexdigest() and art["bytes"] == len(whole)
        middle = d.call("read", {"path": art["ref"], "offset": lines // 2, "limit": 2})
        assert middle.ok and f"{lines // 2}\n" in middle.content.replace("\t", "\n")
        [obs] = [o for o in _observations(store, d.session.id) if o.tool == "bash"]
        assert obs.artifacts[0].sha256 == art["sha256"]
        assert not list(Path(box._runner.spill_dir or "").iterdir())  # the spill file was taken
    finally:
        box.close()


def test_short_output_keeps_nothing(store: EventStore, workspace: Path) -> None:
    box = HostSandbox(str(workspace))
    try:
        res = _dispatcher(store, workspace, box).call("bash", {"command": "echo hi", "description": "x"})
        assert res.ok and res.details["artifacts"] == []
    finally:
        box.close()


def test_bwrap_backend_keeps_big_outputs_too(store: EventStore, workspace: Path) -> None:
    box = BwrapSandbox(str(workspace))
    try:
        res = _dispatcher(store, workspace, box).call(
            "bash", {"command": "seq 1 300000", "description": "count"})
        assert res.ok and res.truncated and res.details["artifacts"][0]["bytes"] > 1_000_000
    finally:
        box.close()
