"""The bash tool's pure parts: spotting commands that need a terminal, and
shaping output to the 30,000-character cap (no sandbox involved)."""

from __future__ import annotations

import pytest

from tools import native_tools
from tools.bash import MAX_OUTPUT_CHARS, Bash, interactive_problem, shape_output


@pytest.mark.parametrize("command", [
    "vim a.txt", "nano x", "emacs f", "less log", "cat log | less", "top", "htop",
    "watch ls", "tmux", "ssh host", "python", "python3", "node", "FOO=1 python3",
    "sudo vim /etc/x", "git rebase -i HEAD~2", "git rebase --interactive main",
    "git -C repo rebase -i HEAD~2", "git add -p", "git -c a.b=1 add --patch",
    "git checkout -p", "git stash -p", "ls && vim x", "true; less x", "(cd a && vim b)",
    "make || less build.log", "/usr/bin/vim x", "git rebase -ir main",
])
def test_commands_that_need_a_terminal_are_spotted(command: str) -> None:
    problem = interactive_problem(command)
    assert problem is not None and ("terminal" in problem or "interactive" in problem
                                    or "editor" in problem)


@pytest.mark.parametrize("command", [
    "echo vim", "git commit -m 'less is more'", "python3 -c 'print(1)'", "python3 script.py",
    "node app.js", "man ls", "top -b -n 1", "emacs --batch -l x.el", "git log --oneline",
    "git add file.txt", "git rebase main", "cat <<EOF\nvim\nless\nEOF\nls",
    "apt-get install -y vim", "grep -r less .", "echo 'unbalanced", "", "   ", "\x00",
    "ls " + "x " * 20000,
])
def test_ordinary_commands_are_not_refused(command: str) -> None:
    assert interactive_problem(command) is None


def test_output_at_the_cap_is_kept_whole() -> None:
    data = b"a" * MAX_OUTPUT_CHARS
    text, cut, dropped = shape_output(data, b"", len(data))
    assert text == "a" * MAX_OUTPUT_CHARS and not cut and dropped == 0


def test_output_over_the_cap_keeps_head_and_tail() -> None:
    data = b"H" * 20_000 + b"T" * 20_000
    text, cut, dropped = shape_output(data, b"", len(data))
    assert cut and len(text) <= MAX_OUTPUT_CHARS
    assert text.startswith("H" * 14_500) and text.endswith("T" * 14_500)
    assert dropped == 40_000 - 29_000 and "cut from the middle" in text


def test_a_gap_in_the_captured_bytes_is_reported() -> None:
    text, cut, dropped = shape_output(b"start\n", b"end\n", 10_000_000)
    assert cut and text.startswith("start\n") and text.endswith("end\n")
    assert dropped == 10_000_000 - 10 and "about 9999990 bytes" in text


def test_multibyte_and_invalid_bytes_never_raise() -> None:
    data = "é".encode() * 40_000 + b"\xff\xfe"
    text, cut, _ = shape_output(data, b"", len(data))
    assert cut and len(text) <= MAX_OUTPUT_CHARS and text.endswith("\ufffd\ufffd")


def test_bash_is_registered_and_its_schema_requires_a_description() -> None:
    tool = native_tools()["bash"]
    assert isinstance(tool, Bash)
    schema = tool.input_schema()
    assert schema["required"] == ["description"]
    assert set(schema["properties"]) == {"command", "description", "timeout_ms", "background",
                                         "job_id", "kill"}
    # The description must say that cwd persists and shell state does not.
    assert "FRESH shell" in tool.description
    assert "working directory carries over" in tool.description
    assert "shell functions" in tool.description and "do NOT" in tool.description


# -- one shell parser (issue 11): tools.shell_parser reads the command for both the tool and policy --


@pytest.mark.parametrize("command", [
    "if true; then vim x; fi",  # keywords are looked through
    "echo $(less log)",  # command substitution runs its commands
    "diff <(vim a) b",  # so does process substitution
    "bash -c 'nano notes'",  # and a literal bash -c string
    "timeout 5 vim x", "env FOO=1 less x", "sudo -u root vim /etc/x", "nice -n 5 top",
    "xargs -I{} vim {}", "watch -n 1 ls", "exec htop",
])
def test_newly_spotted_through_the_shared_parser(command: str) -> None:
    assert interactive_problem(command) is not None, command


@pytest.mark.parametrize("command", [
    "echo 'print(1)' | python3",  # stdin is a pipe, not a terminal
    "python3 < script.py", "python3 <<EOF\nprint(1)\nEOF", "node <<< 'console.log(1)'",
    "cat <<'EOF'\nwatch ls\nEOF",  # a here-document body is data
    "echo watch ls", "git log --format=%s | cat",
])
def test_redirected_stdin_and_data_are_not_refused(command: str) -> None:
    assert interactive_problem(command) is None, command


def test_watch_is_read_the_same_way_by_policy_and_the_tool() -> None:
    """The two parsers disagreed on `watch` (a wrapper for policy, a TTY program for the tool)."""
    from tools.shell_parser import split_command

    parsed = split_command("watch -n 2 git status")
    assert [c.program for c in parsed.commands if c.program] == ["git"]
    assert any("watch" in c.wrappers for c in parsed.commands)
    problem = interactive_problem("watch -n 2 git status")
    assert problem is not None and "watch" in problem


@pytest.mark.parametrize("command,shown", [
    ("echo x >> ~/.bashrc", "echo x >>~/.bashrc"),  # an append, never shown as an overwrite
    ("sort < in.txt > out.txt", "sort <in.txt >out.txt"),  # a read, never shown as a write
    ("make 2> err.log", "make 2>err.log"),
    ("cat <<'EOF' > notes.txt\nbody\nEOF", "cat <<EOF >notes.txt"),
    ("tr a b <<< hello", "tr a b <<<hello"),
    ("cmd &>> all.log", "cmd &>>all.log"),
])
def test_a_commands_reprint_keeps_each_redirections_operator(command: str, shown: str) -> None:
    """Approvals and `policy explain` quote this text; it once printed every redirection as `>`."""
    from tools.shell_parser import split_command

    assert [c.text for c in split_command(command).commands] == [shown]
