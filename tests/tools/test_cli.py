"""The file tools through the real entry point, `abhed tool`, in a subprocess:
exit 0 whenever the tool ran, 2 on usage errors, the result JSON as the last
stdout line, `--session` keeping read-before-edit across processes, and
permission errors met by an unprivileged user."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

NOBODY = 65534


def _session(stderr: str) -> str:
    m = re.search(r"session: (\S+)", stderr)
    assert m, stderr
    return m.group(1)


def test_tool_ran_exits_0_with_the_result_json_last(cli: Any, workspace: Path) -> None:
    (workspace / "f.txt").write_text("hello\n")
    rc, result, stdout, stderr = cli("read", json.dumps({"path": f"{workspace}/f.txt"}),
                                     "--workspace", str(workspace))
    assert rc == 0, stderr
    assert result == json.loads(stdout.strip().splitlines()[-1])
    assert result is not None and result["ok"] is True and result["content"] == "     1\thello"
    assert set(result) == {"ok", "content", "truncated", "error", "details"}


def test_a_failing_tool_still_exits_0(cli: Any, workspace: Path) -> None:
    rc, result, _, _ = cli("read", json.dumps({"path": "relative.txt"}), "--workspace", str(workspace))
    assert rc == 0 and result is not None
    assert result["ok"] is False and result["error"]["code"] == "relative_path"
    assert f"{workspace}/relative.txt" in result["content"]


@pytest.mark.parametrize(
    "argv",
    [
        ["read", "{not json"],
        ["nosuchtool", "{}"],
        ["read", "{}", "--workspace", "/nonexistent/dir"],
        ["read", "{}", "--session", "s-does-not-exist"],
    ],
)
def test_usage_errors_exit_2(cli: Any, workspace: Path, argv: list[str]) -> None:
    if "--workspace" not in argv:
        argv = [*argv, "--workspace", str(workspace)]
    rc, result, stdout, stderr = cli(*argv)
    assert rc == 2, (stdout, stderr)
    assert result is None
    assert "Error: " in stderr and "Traceback" not in stderr  # a usage error, said, never a crash


@pytest.mark.parametrize("args", ["[1, 2]", '{"path": 5, "extra": 1}', '{"path": "\\u0000"}'])
def test_malformed_arguments_are_a_tool_error_not_a_crash(cli: Any, workspace: Path, args: str) -> None:
    rc, result, _, stderr = cli("read", args, "--workspace", str(workspace))
    assert rc == 0, stderr
    assert result is not None and result["ok"] is False
    assert result["error"]["code"] in ("invalid_arguments", "invalid_path")


def test_large_content_through_the_cli(cli: Any, workspace: Path) -> None:
    content = "x" * 100_000 + "\n"
    rc, result, _, _ = cli("write", json.dumps({"path": f"{workspace}/big.txt", "content": content}),
                           "--workspace", str(workspace))
    assert rc == 0 and result is not None and result["ok"], result
    assert (workspace / "big.txt").read_text() == content


def test_session_reuse_keeps_read_before_edit_across_processes(cli: Any, workspace: Path) -> None:
    target = workspace / "f.py"
    target.write_text("x = 1\n")
    edit = json.dumps({"path": str(target), "old_string": "x = 1", "new_string": "x = 2"})
    rc, result, _, stderr = cli("read", json.dumps({"path": str(target)}), "--workspace", str(workspace))
    assert rc == 0 and result is not None and result["ok"]
    sid = _session(stderr)
    # A new session has not read the file.
    rc, result, _, stderr2 = cli("edit", edit, "--workspace", str(workspace))
    assert result is not None and result["error"]["code"] == "not_read"
    assert _session(stderr2) != sid
    # The first session has, in another process.
    rc, result, _, stderr3 = cli("edit", edit, "--workspace", str(workspace), "--session", sid)
    assert rc == 0 and result is not None and result["ok"], result
    assert _session(stderr3) == sid
    assert target.read_text() == "x = 2\n"
    # A session belongs to its workspace: reusing it elsewhere is a usage error.
    other = workspace.parent / "other-ws"
    other.mkdir()
    rc, result, _, stderr4 = cli("read", json.dumps({"path": f"{other}/x"}), "--workspace", str(other),
                                 "--session", sid)
    assert rc == 2 and result is None and "belongs to workspace" in stderr4
    # And it remembers its own edit: a second edit needs no re-read ...
    again = json.dumps({"path": str(target), "old_string": "x = 2", "new_string": "x = 3"})
    rc, result, _, _ = cli("edit", again, "--workspace", str(workspace), "--session", sid)
    assert result is not None and result["ok"]
    # ... but a change by someone else makes the session's view stale.
    target.write_text("x = 99\n")
    back = json.dumps({"path": str(target), "old_string": "x = 99", "new_string": "x = 4"})
    rc, result, _, _ = cli("edit", back, "--workspace", str(workspace), "--session", sid)
    assert result is not None and result["error"]["code"] == "file_changed"


def test_deeply_nested_args_json_is_a_usage_error(cli: Any, workspace: Path) -> None:
    rc, _, _, stderr = cli("read", "[" * 20000 + "]" * 20000, "--workspace", str(workspace))
    assert rc == 2 and "Traceback" not in stderr


def test_lone_surrogate_in_args_json_is_a_tool_error(cli: Any, workspace: Path) -> None:
    rc, result, _, stderr = cli("read", '{"path": "\\ud800"}', "--workspace", str(workspace))
    assert rc == 0 and "Traceback" not in stderr
    assert result is not None and result["error"]["code"] == "invalid_path"


# -- permission denied, as a real unprivileged user ---------------------------


@pytest.fixture
def shared_dirs() -> Iterator[tuple[Path, Path]]:
    """A workspace and ABHED_HOME that uid 65534 can use (pytest's tmp dirs are 0700 root)."""
    base = Path(tempfile.mkdtemp(prefix="abhed-perm-")).resolve()
    try:
        os.chmod(base, 0o755)
        ws, home = base / "ws", base / "home"
        ws.mkdir()
        home.mkdir()
        if os.geteuid() == 0:
            os.chown(ws, NOBODY, NOBODY)
            os.chown(home, NOBODY, NOBODY)
        yield ws, home
    finally:
        shutil.rmtree(base)


def _as_user(cli: Any, home: Path, *argv: str) -> dict[str, Any]:
    user = NOBODY if os.geteuid() == 0 else None
    rc, result, stdout, stderr = cli(*argv, env={"ABHED_HOME": str(home)}, user=user)
    assert rc == 0, stdout + stderr
    assert result is not None
    result["session"] = _session(stderr)
    return result


def _root_owned(path: Path, mode: int) -> None:
    if os.geteuid() == 0:
        os.chown(path, 0, 0)
    os.chmod(path, mode)


@pytest.mark.slow
def test_permission_denied_as_an_unprivileged_user(cli: Any, shared_dirs: tuple[Path, Path]) -> None:
    ws, home = shared_dirs
    secret = ws / "unreadable.txt"
    secret.write_text("root only\n")
    _root_owned(secret, 0o600)
    locked = ws / "locked"
    locked.mkdir()
    (locked / "inside.txt").write_text("x\n")
    _root_owned(locked, 0o700)
    ro_dir = ws / "ro_dir"
    ro_dir.mkdir()
    _root_owned(ro_dir, 0o755)

    res = _as_user(cli, home, "read", json.dumps({"path": str(secret)}), "-w", str(ws))
    assert res["error"]["code"] == "permission_denied" and "root only" not in res["content"]

    res = _as_user(cli, home, "read", json.dumps({"path": str(locked / "inside.txt")}), "-w", str(ws))
    assert res["error"]["code"] == "permission_denied"

    res = _as_user(cli, home, "write", json.dumps({"path": str(ro_dir / "new.txt"), "content": "x"}),
                   "-w", str(ws))
    assert res["error"]["code"] == "permission_denied" and "Nothing was written" in res["content"]
    assert os.listdir(ro_dir) == []

    # The user's own files still work end to end.
    mine = ws / "mine.txt"
    res = _as_user(cli, home, "write", json.dumps({"path": str(mine), "content": "a\n"}), "-w", str(ws))
    assert res["ok"] and mine.read_text() == "a\n"
    if os.geteuid() == 0:
        assert os.stat(mine).st_uid == NOBODY


@pytest.mark.slow
def test_regression_file_not_writable_by_us_was_replaced_by_rename(
    cli: Any, shared_dirs: tuple[Path, Path]
) -> None:
    """Mode 0644 has a write bit, so the old check passed; the writable directory then let
    the temp file be renamed over root's file, silently taking it over."""
    ws, home = shared_dirs
    theirs = ws / "theirs.txt"
    theirs.write_text("owned by root\n")
    _root_owned(theirs, 0o644)
    res = _as_user(cli, home, "read", json.dumps({"path": str(theirs)}), "-w", str(ws))
    assert res["ok"], res
    sid = res["session"]
    res = _as_user(cli, home, "write", json.dumps({"path": str(theirs), "content": "taken over\n"}),
                   "-w", str(ws), "--session", sid)
    assert res["error"]["code"] == "permission_denied", res
    edit = json.dumps({"path": str(theirs), "old_string": "owned", "new_string": "stolen"})
    res = _as_user(cli, home, "edit", edit, "-w", str(ws), "--session", sid)
    assert res["error"]["code"] == "permission_denied", res
    assert theirs.read_text() == "owned by root\n"
    st = os.stat(theirs)
    assert stat.S_IMODE(st.st_mode) == 0o644 and (os.geteuid() != 0 or st.st_uid == 0)

