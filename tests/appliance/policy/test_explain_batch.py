"""``abhed policy explain --batch``: JSON lines in, one JSON line out per line, in order, nothing lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli import main
from tests.appliance.policy.test_corpus import CASES


def run_batch(data: bytes, workspace: Path, *extra: str) -> tuple[int, list[dict[str, Any]], str]:
    out = CliRunner().invoke(main, ["policy", "explain", "--batch", "-", "-w", str(workspace),
                                    *extra], input=data)
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    return out.exit_code, lines, out.stderr


@pytest.fixture
def workspace(tmp_path: Path, abhed_home: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def test_the_whole_corpus_in_one_batch_gets_the_verdicts_one_call_gets(workspace: Path) -> None:
    data = "".join(json.dumps({"command": c, "id": i}) + "\n" for i, (c, _) in enumerate(CASES))
    code, lines, err = run_batch(data.encode(), workspace, "--mode", "auto")
    assert code == 0, err
    assert [x["id"] for x in lines] == list(range(len(CASES)))
    assert [x["line"] for x in lines] == list(range(1, len(CASES) + 1))
    for answer, (command, case) in zip(lines, CASES, strict=True):
        assert (answer["verdict"], answer["decided_by"]) == (case["verdict"], case["by"]), command
    assert f"explained {len(CASES)} lines" in err


def test_malformed_lines_are_answered_in_place_and_the_rest_still_explained(workspace: Path) -> None:
    good = json.dumps({"command": "git status"}).encode()
    lines_in = [
        good,
        b"not json",
        b"",
        b"[1, 2]",
        b'"a string"',
        b'{"tool": "nosuchtool", "args": {}}',
        b'{"args": {}}',
        b'{"command": 5}',
        b'{"command": "ls", "mode": "yolo"}',
        b"\xff\xfe{}",
        b"x" * ((1 << 20) + 10),
        json.dumps({"tool": "write", "args": {"path": "/etc/passwd", "content": "x"}}).encode(),
        json.dumps({"tool": "bash", "args": [1]}).encode(),
        json.dumps({"command": "rm -rf build", "id": {"nested": [1]}}).encode() + b"\r",
        good,
    ]
    code, lines, err = run_batch(b"\n".join(lines_in) + b"\n", workspace, "--mode", "auto")
    assert code == 1, "an error line makes the exit status 1"
    assert [x["line"] for x in lines] == list(range(1, len(lines_in) + 1)), "one answer per line"
    codes = [x.get("error", {}).get("code") for x in lines]
    assert codes == [None, "not_json", "empty", "not_object", "not_object", "unknown_tool", "no_tool",
                     "bad_command", "bad_mode", "not_utf8", "too_long", None, None, None, None]
    for x in lines:
        if "error" in x:
            assert x["error"]["message"].startswith(f"line {x['line']}: ")
    assert lines[0]["verdict"] == lines[-1]["verdict"] == "allow"
    assert lines[11]["verdict"] == "invalid" and lines[11]["decided_by"] == "outside_workspace"
    assert lines[12]["verdict"] == "invalid"
    assert lines[13]["verdict"] == "ask" and lines[13]["id"] == {"nested": [1]}
    assert "explained 15 lines: 2 allow, 1 ask, 10 error, 2 invalid" in err


def test_a_line_nested_past_the_recursion_limit_is_answered_and_the_batch_goes_on(
        workspace: Path) -> None:
    """It crashed the whole batch with a RecursionError traceback, losing every later line."""
    data = b"[" * 100_000 + b"\n" + json.dumps({"command": "git status"}).encode() + b"\n"
    code, lines, err = run_batch(data, workspace, "--mode", "auto")
    assert code == 1, err
    assert lines[0]["error"]["code"] == "not_json" and "nests too deeply" in lines[0]["error"]["message"]
    assert (lines[1]["line"], lines[1]["verdict"]) == (2, "allow")


def test_a_line_may_carry_its_own_mode_and_a_file_without_a_last_newline_loses_nothing(
        workspace: Path) -> None:
    data = b'{"command": "ls", "mode": "plan"}\n{"command": "ls", "mode": "auto"}'
    code, lines, _ = run_batch(data, workspace)
    assert code == 0
    assert [(x["verdict"], x["decided_by"]) for x in lines] == [("deny", "mode:plan"),
                                                                ("allow", "mode:auto")]


def test_an_empty_batch_answers_nothing_and_succeeds(workspace: Path) -> None:
    code, lines, err = run_batch(b"", workspace)
    assert (code, lines) == (0, [])
    assert "explained 0 lines" in err


@pytest.mark.parametrize("argv", [
    ["policy", "explain"],
    ["policy", "explain", "bash"],
    ["policy", "explain", "bash", "{}", "--batch", "-"],
])
def test_one_call_or_a_batch_never_both_nor_neither(argv: list[str], abhed_home: Path) -> None:
    out = CliRunner().invoke(main, argv, input=b"")
    assert out.exit_code == 2
    assert "--batch" in out.output


def test_the_installed_command_reads_a_file_of_calls(workspace: Path, abhed_home: Path) -> None:
    calls = workspace / "calls.jsonl"
    calls.write_text('{"command": "bash -lc \'rm -rf ~\'"}\n{"command": "git log"}\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "cli", "policy", "explain", "--batch",
                           str(calls), "-w", str(workspace), "--mode", "auto"],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    first, second = (json.loads(x) for x in proc.stdout.splitlines())
    assert first["decided_by"] == "destructive"
    assert "runs the script of bash -lc: rm -rf ~" in first["reason"]
    assert second["verdict"] == "allow"
