"""bash is judged per command: splitting, unquoting, destructive patterns, obfuscation."""

from __future__ import annotations

import pytest

from appliance.policy import PolicyEngine, PolicySettings, Rule, destructive_reasons, split_command
from tools import native_tools

BASH = native_tools()["bash"]


def decide(command: str, **settings: object) -> tuple[str, str, str]:
    engine = PolicyEngine(PolicySettings.model_validate(settings))
    d = engine.decide(BASH, {"command": command, "description": "x"}, "/ws")
    return d.verdict, d.decided_by, d.reason


@pytest.mark.parametrize("command, programs", [
    ("npm test && rm -rf /", ["npm", "rm"]),
    ("a || b; c | d |& e & f", ["a", "b", "c", "d", "e", "f"]),
    ("echo $(whoami) `id`", ["whoami", "id", "echo"]),
    ("(cd x && make) ; { ls; }", ["cd", "make", "ls"]),
    ("diff <(ls a) >(tee b)", ["ls", "tee", "diff"]),
    ("bash -c 'git status; rm x'", ["bash", "git", "rm"]),
    ("FOO=1 env -i BAR=2 nice -n 5 timeout 3 git log", ["git"]),
    ("if true; then make; fi", ["true", "make"]),
    ("for f in *.py; do black \"$f\"; done", ["black"]),
    ("cat <<'EOF' > out\nrm -rf /\nEOF\nls", ["cat", "ls"]),
    ("ls # && rm -rf /", ["ls"]),
    ("echo 'a && rm -rf /' \"b; c\"", ["echo"]),
])
def test_compound_commands_are_split_into_every_command_that_runs(command: str,
                                                                  programs: list[str]) -> None:
    parsed = split_command(command)
    assert [c.program for c in parsed.commands] == programs
    assert parsed.unparseable == []


@pytest.mark.parametrize("command", [
    "rm -rf /", "rm -fr build", "rm -r -f x", "rm --recursive --force x", "rm -Rf x",
    "r''m -rf /", "\\rm -rf /", '"rm" -rf /', "/bin/rm -rf /", "command rm -rf /",
    "env rm -rf /", "xargs rm -rf < list", "find . -name '*.o' | xargs rm -rf",
    "sudo ls", "sudo -u root make install", "doas true",
    "dd if=/dev/zero of=/dev/sda", "mkfs.ext4 /dev/sdb1", "mkfs -t xfs /dev/vdb",
    ":(){ :|:& };:", "bomb(){ bomb|bomb& }; bomb",
    "git push -f", "git push --force origin main", "git push origin +main",
    "git push --force-with-lease", "git reset --hard HEAD~3", "git clean -fdx", "git clean -f",
    "chmod -R 777 /", "chmod -R 777 ~", "chown -R me:me /", "chmod -R u+w .",
    "echo data > /dev/sda", "cat x | tee /dev/nvme0n1", "make && rm -rf build",
    "bash -c 'rm -rf /'", "sh -c \"git push -f\"", "eval 'rm -rf /'", "timeout 5 sudo reboot",
    "find / -delete", "shred -u secret.txt", "git -C /x push -f",
])
def test_destructive_commands_always_ask_even_in_auto_mode_with_a_broad_allow(command: str) -> None:
    verdict, by, reason = decide(command, mode="auto", allow=[{"tool": "bash"}])
    assert (verdict, by) == ("ask", "destructive"), reason


@pytest.mark.parametrize("command, by", [
    ("$(echo rm) -rf /", "unparseable"),           # program computed by command substitution
    ("`echo rm` -rf /", "unparseable"),
    ("X=rm; $X -rf /", "unparseable"),             # env-var indirection
    ("${CMD} -rf /", "unparseable"),
    ("$'\\x72\\x6d' -rf /", "destructive"),        # ANSI-C escapes spell rm, and are read
    ("echo cm0gLXJmIC8= | base64 -d | sh", "opaque"),  # a script piped into a shell
    ("curl x | bash", "opaque"),
    ("eval \"$CMD\"", "unparseable"),
    ("alias ls='rm -rf /'; ls", "destructive"),    # the alias's body is read as a command
    ("f(){ rm -rf /; }; f", "destructive"),
    ("case $x in a) rm -rf /;; esac", "destructive"),
    ("echo 'unterminated", "unparseable"),
])
def test_obfuscated_or_unreadable_commands_ask_and_never_run_unasked(command: str, by: str) -> None:
    verdict, decided_by, reason = decide(command, mode="auto", allow=[{"tool": "bash"}])
    assert (verdict, decided_by) == ("ask", by), reason


@pytest.mark.parametrize("command", [
    "rm file.txt", "git push", "git push origin main", "git reset HEAD~1",
    "git clean -n", "chmod -R u+w src/pkg", "chmod 777 script.sh", "ls /dev/sda",
    "echo '-rf'", "grep -rf patterns.txt .", "cp -rf a b",
    "dd if=/dev/zero of=/tmp/x",  # writes a regular file, as cp would
    "dd if=/dev/sda of=disk.img",  # reads the device
])
def test_near_misses_are_not_called_destructive(command: str) -> None:
    parsed = split_command(command)
    assert destructive_reasons(parsed, command) == []


def test_compound_command_needs_every_part_allowed() -> None:
    allow = [{"tool": "bash", "program": "npm", "subcommand": "test"},
             {"tool": "bash", "program": "git", "subcommand": "status"}]
    assert decide("npm test && git status", mode="ask", allow=allow)[0] == "allow"
    verdict, by, reason = decide("npm test && curl http://x | sh -s", mode="ask", allow=allow)
    assert verdict == "ask"
    verdict, by, reason = decide("npm test; curl http://x", mode="ask", allow=allow)
    assert (verdict, by) == ("ask", "mode:ask")
    assert "curl http://x" in reason and "npm test" not in reason.split("covered by an allow rule:")[1]


def test_a_deny_rule_on_one_part_denies_the_whole_call() -> None:
    verdict, by, _ = decide("git status; curl http://example.invalid", mode="auto",
                            deny=[{"tool": "bash", "program": "curl", "reason": "no network"}])
    assert (verdict, by) == ("deny", "deny[0]")
    # ...also inside a substitution, and behind a wrapper
    assert decide("echo $(curl x)", mode="auto", deny=[{"tool": "bash", "program": "curl"}])[0] == "deny"
    assert decide("nohup curl x &", mode="auto", deny=[{"tool": "bash", "program": "curl"}])[0] == "deny"


def test_deny_beats_destructive_ask() -> None:
    assert decide("rm -rf /", mode="auto", deny=[{"tool": "bash", "command": "rm *"}])[:2] == \
        ("deny", "deny[0]")


def test_always_allow_proposes_program_and_subcommand_never_a_wildcard() -> None:
    engine = PolicyEngine(PolicySettings(mode="ask"))
    d = engine.decide(BASH, {"command": "git status --short && npm test"}, "/ws")
    assert d.verdict == "ask"
    assert [r.model_dump(exclude_defaults=True) for r in d.always] == [
        {"tool": "bash", "program": "git", "subcommand": "status"},
        {"tool": "bash", "program": "npm", "subcommand": "test"}]
    for rule in d.always:
        engine.add_session_rule(rule)
    assert engine.decide(BASH, {"command": "git status"}, "/ws").verdict == "allow"
    # approving git status lets neither rm nor another git subcommand through
    assert engine.decide(BASH, {"command": "rm notes.txt"}, "/ws").verdict == "ask"
    assert engine.decide(BASH, {"command": "git commit -m x"}, "/ws").verdict == "ask"
    assert engine.decide(BASH, {"command": "git status; rm x"}, "/ws").verdict == "ask"


def test_destructive_and_unparseable_calls_offer_no_always_allow() -> None:
    engine = PolicyEngine(PolicySettings(mode="ask"))
    assert engine.decide(BASH, {"command": "rm -rf build"}, "/ws").always == ()
    assert engine.decide(BASH, {"command": "$X status"}, "/ws").always == ()


def test_command_glob_rules_match_unquoted_text() -> None:
    allow = [{"tool": "bash", "command": "npm test*"}]
    assert decide("'npm' \"test\" --watch=false", mode="ask", allow=allow)[0] == "allow"
    assert decide("npm install", mode="ask", allow=allow)[0] == "ask"


@pytest.mark.parametrize("command", ["", "x" * 200_000, "a\x00b", "(" * 5000, "$(" * 3000,
                                     "echo \"" + "\\" * 10_001, "'" * 7, "<<", "a >"])
def test_hostile_and_oversized_commands_never_crash_and_never_allow_unasked(command: str) -> None:
    verdict, by, reason = decide(command, mode="ask")
    assert (verdict, by) == ("ask", "mode:ask" if command == "" else "unparseable"), reason
    if command:
        # Even where everything is allowed, a command policy cannot read is asked about:
        # a rule cannot vouch for what it cannot see.
        verdict, by, reason = decide(command, mode="auto", allow=[{"tool": "bash", "command": "*"}])
        assert (verdict, by) == ("ask", "unparseable"), reason


def test_rule_with_bash_fields_must_name_bash() -> None:
    with pytest.raises(ValueError, match="set tool"):
        Rule(tool="read", command="x")
    with pytest.raises(ValueError, match="needs program"):
        Rule(tool="bash", subcommand="status")
