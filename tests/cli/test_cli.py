"""The `abhed` command: tool, sessions, events."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from appliance import events_db_path
from cli import main


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def last_json(result: Result) -> dict[str, object]:
    return json.loads(result.stdout.strip().splitlines()[-1])


def session_of(result: Result) -> str:
    for line in result.stderr.splitlines():
        if line.startswith("session: "):
            return line.split(": ", 1)[1]
    raise AssertionError(result.stderr)


def test_tool_prints_result_json_last_and_exits_zero_even_on_tool_error(workspace: Path) -> None:
    ok = run("tool", "glob", '{"pattern": "*"}', "--workspace", str(workspace))
    assert ok.exit_code == 0
    assert last_json(ok)["ok"] is True
    failed = run("tool", "read", '{"path": "nope.txt"}', "--workspace", str(workspace))
    assert failed.exit_code == 0
    body = last_json(failed)
    assert body["ok"] is False
    assert set(body) == {"ok", "content", "truncated", "error", "details"}
    assert body["error"]["code"] == "relative_path"  # type: ignore[index]


def test_tool_usage_errors_exit_two(workspace: Path) -> None:
    assert run("tool", "read", "{bad json", "-w", str(workspace)).exit_code == 2
    assert run("tool", "nosuch", "{}", "-w", str(workspace)).exit_code == 2
    assert run("tool", "read", "{}", "-w", str(workspace / "missing")).exit_code == 2
    assert run("tool", "read", "{}").exit_code == 2
    assert run("tool", "read", "{}", "-w", str(workspace), "--session", "s-unknown").exit_code == 2


def test_tool_non_object_json_is_a_tool_error_not_a_crash(workspace: Path) -> None:
    for text in ("[]", "42", "null", '"str"', json.dumps({"a": [[[[[]]]]]})):
        result = run("tool", "read", text, "-w", str(workspace))
        assert result.exit_code == 0
        assert last_json(result)["error"]["code"] == "invalid_arguments"  # type: ignore[index]


def test_session_reuse_keeps_read_before_edit_across_invocations(workspace: Path) -> None:
    target = workspace / "f.txt"
    target.write_text("alpha\n")
    first = run("tool", "read", json.dumps({"path": str(target)}), "-w", str(workspace))
    sid = session_of(first)
    edit = json.dumps({"path": str(target), "old_string": "alpha", "new_string": "beta"})
    fresh = run("tool", "edit", edit, "-w", str(workspace), "--yes")
    assert last_json(fresh)["error"]["code"] == "not_read"  # type: ignore[index]
    reused = run("tool", "edit", edit, "-w", str(workspace), "--session", sid, "--yes")
    assert last_json(reused)["ok"] is True
    assert target.read_text() == "beta\n"


def test_session_of_another_workspace_is_refused(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    sid = session_of(run("tool", "glob", '{"pattern":"*"}', "-w", str(workspace)))
    result = run("tool", "glob", '{"pattern":"*"}', "-w", str(other), "--session", sid)
    assert result.exit_code == 2
    assert "belongs to workspace" in result.stderr


def test_sessions_list_and_show(workspace: Path) -> None:
    assert "no sessions" in run("sessions", "list").stdout
    sid = session_of(run("tool", "glob", '{"pattern":"*"}', "-w", str(workspace)))
    table = run("sessions", "list").stdout
    assert sid in table and str(workspace) in table
    rows = json.loads(run("sessions", "list", "--json").stdout)
    assert rows[0]["id"] == sid and rows[0]["events"] == 6  # + session_ended
    shown = run("sessions", "show", sid).stdout
    assert "call" in shown and "glob" in shown and "result" in shown
    lines = [json.loads(x) for x in run("sessions", "show", sid, "--json").stdout.splitlines()]
    assert [x["type"] for x in lines] == ["session_started", "decision_basis", "action",
                                          "policy_decision", "observation", "session_ended"]
    assert all(len(x["hash"]) == 64 for x in lines)
    missing = run("sessions", "show", "s-missing")
    assert missing.exit_code == 1 and "no session" in missing.stderr


def test_events_verify_exit_codes(workspace: Path) -> None:
    run("tool", "glob", '{"pattern":"*"}', "-w", str(workspace))
    good = run("events", "verify")
    assert good.exit_code == 0 and "6 events" in good.stdout
    conn = sqlite3.connect(events_db_path(), isolation_level=None)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET body = replace(body, 'glob', 'bash') WHERE seq = 2")
    bad = run("events", "verify")
    assert bad.exit_code == 1
    assert "event 2" in bad.stderr


def test_events_head_prints_count_and_hash(workspace: Path) -> None:
    assert run("events", "head").stdout.split() == ["0", "0" * 64]
    run("tool", "glob", '{"pattern":"*"}', "-w", str(workspace))
    count, digest = run("events", "head").stdout.split()
    assert count == "6" and len(digest) == 64


def test_malformed_config_is_a_usage_error(workspace: Path, abhed_home: Path) -> None:
    (abhed_home / "config.json").write_text("{not json")
    result = run("tool", "glob", '{"pattern":"*"}', "-w", str(workspace))
    assert result.exit_code == 2 and "not valid JSON" in result.stderr
    (abhed_home / "config.json").write_text('{"tools": {"bogus_setting": 1}}')
    result = run("tool", "glob", '{"pattern":"*"}', "-w", str(workspace))
    assert result.exit_code == 2 and "bogus_setting" in result.stderr


def test_config_secret_paths_apply(workspace: Path, abhed_home: Path) -> None:
    (workspace / "notes.txt").write_text("private")
    (abhed_home / "config.json").write_text('{"tools": {"secret_paths": ["notes.txt"]}}')
    result = run("tool", "read", json.dumps({"path": str(workspace / "notes.txt")}), "-w", str(workspace))
    assert last_json(result)["error"]["code"] == "secret_path"  # type: ignore[index]


def test_the_installed_entry_point_runs(workspace: Path, abhed_home: Path) -> None:
    exe = Path(sys.executable).parent / "abhed"
    env = dict(os.environ, ABHED_HOME=str(abhed_home))
    proc = subprocess.run([str(exe), "tool", "glob", '{"pattern":"*"}', "-w", str(workspace)],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0
    assert json.loads(proc.stdout.splitlines()[-1])["ok"] is True
    assert proc.stderr.startswith("session: s-")


def test_tool_bash_runs_in_the_configured_sandbox(workspace: Path, abhed_home: Path) -> None:
    (abhed_home / "config.json").write_text('{"sandbox": {"backend": "bwrap"}}')
    args = json.dumps({"command": f"echo made > {workspace}/out.txt; echo $HOME",
                       "description": "write a file"})
    result = run("tool", "bash", args, "-w", str(workspace), "--yes")
    body = last_json(result)
    assert body["ok"] is True, body
    assert body["details"]["sandbox"] == "bwrap"  # type: ignore[index]
    assert (workspace / "out.txt").read_text() == "made\n"


def test_tool_bash_without_a_usable_sandbox_says_why(workspace: Path, abhed_home: Path,
                                                      tmp_path: Path) -> None:
    (abhed_home / "config.json").write_text(json.dumps(
        {"sandbox": {"backend": "microvm", "image_dir": str(tmp_path / "no-image")}}))
    args = json.dumps({"command": "ls", "description": "list"})
    body = last_json(run("tool", "bash", args, "-w", str(workspace), "--yes"))
    assert body["ok"] is False
    assert body["error"]["code"] == "sandbox_unavailable"  # type: ignore[index]
    assert "no-image" in str(body["content"]) and "image" in str(body["content"])


def test_tool_goes_through_policy_ask_needs_yes(workspace: Path) -> None:
    args = json.dumps({"path": str(workspace / "new.txt"), "content": "x"})
    declined = last_json(run("tool", "write", args, "-w", str(workspace)))
    assert declined["ok"] is False
    assert declined["error"]["code"] == "approval_denied"  # type: ignore[index]
    assert "--yes" in str(declined["content"])
    assert not (workspace / "new.txt").exists()
    approved = last_json(run("tool", "write", args, "-w", str(workspace), "--yes"))
    assert approved["ok"] is True and (workspace / "new.txt").read_text() == "x"


def test_tool_write_without_yes_tells_the_person_not_the_model(workspace: Path) -> None:
    # The bug: without --yes the CLI answered "The user declined this write call ... ask the
    # user how they want to proceed": words for a model, to a person who declined nothing.
    args = json.dumps({"path": str(workspace / "new.txt"), "content": "x"})
    result = run("tool", "write", args, "-w", str(workspace))
    body = last_json(result)
    content = str(body["content"])
    assert body["error"]["code"] == "approval_denied"  # type: ignore[index]
    assert content.startswith("Not run: policy asks before this write call (")
    assert "Run the same command again with --yes added to approve it" in content
    assert "user declined" not in content.lower() and "ask the user" not in content
    db = sqlite3.connect(events_db_path())
    try:
        reasons = [r[0] for r in db.execute(
            "select json_extract(body, '$.reason') from events where type = 'approval'")]
    finally:
        db.close()
    assert reasons == ["not approved: abhed tool ran without --yes"]


def test_tool_deny_rule_wins_over_yes(workspace: Path, abhed_home: Path) -> None:
    (abhed_home / "config.json").write_text(json.dumps(
        {"policy": {"deny": [{"tool": "write"}]}}))
    args = json.dumps({"path": str(workspace / "new.txt"), "content": "x"})
    body = last_json(run("tool", "write", args, "-w", str(workspace), "--yes", "--mode", "auto"))
    assert body["ok"] is False and not (workspace / "new.txt").exists()


def test_tool_plan_mode_refuses_mutations_but_reads(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    write = json.dumps({"path": str(workspace / "a.txt"), "content": "b"})
    body = last_json(run("tool", "write", write, "-w", str(workspace), "--mode", "plan", "--yes"))
    assert body["ok"] is False and (workspace / "a.txt").read_text() == "a\n"
    read = json.dumps({"path": str(workspace / "a.txt")})
    assert last_json(run("tool", "read", read, "-w", str(workspace), "--mode", "plan"))["ok"] is True


def test_tool_policy_decisions_are_in_the_log(workspace: Path) -> None:
    args = json.dumps({"path": str(workspace / "new.txt"), "content": "x"})
    sid = session_of(run("tool", "write", args, "-w", str(workspace), "--yes"))
    kinds = [json.loads(x)["type"] for x in run("sessions", "show", sid, "--json").stdout.splitlines()]
    assert kinds == ["session_started", "decision_basis", "action", "policy_decision", "approval",
                     "observation", "session_ended"]
