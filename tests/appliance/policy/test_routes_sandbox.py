"""Every route policy follows really runs code: each is run for real in bubblewrap.

For each route (``bash -lc``, ``find -exec``, sed's ``e``, a git alias, ...)
a harmless payload (``touch MARKER``) runs through the bash tool in the
sandbox and must leave its marker, which proves the route executes what it is
given; the same route carrying ``rm -rf`` must then be asked about, with the
route named in the reason.  A route that runs code policy cannot judge
(inline Python) asks even with the harmless payload.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.policy import PolicyEngine, PolicySettings
from appliance.sandbox import BwrapSandbox, SandboxSettings
from tools import ToolContext, Workspace, run_tool
from tools.bash import Bash

pytestmark = pytest.mark.slow

# (template with {P} for the payload, what the reason must name, verdict of the harmless form)
ROUTES = [
    ("bash -lc '{P}'", "the script of bash -lc", "allow"),
    ("bash -ec '{P}'", "the script of bash -ec", "allow"),
    ("sh -xc '{P}'", "the script of sh -xc", "allow"),
    ("bash +c '{P}'", "the script of bash +c", "allow"),
    ("bash -eo pipefail -c '{P}'", "the script of bash -c", "allow"),
    ("bash -oc pipefail '{P}'", "the script of bash -oc", "allow"),
    ("bash -c -- '{P}'", "the script of bash -c", "allow"),
    ("env -i PATH=/usr/bin:/bin bash -lc '{P}'", "the script of bash -lc", "allow"),
    ("nohup bash -lc '{P}' >/dev/null 2>&1", "the script of bash -lc", "allow"),
    ("timeout -k 5 10 bash -c '{P}'", "the script of bash -c", "allow"),
    ("sh -c 'bash -lc \"{P}\"'", "the script of sh -c -> the script of bash -lc", "allow"),
    ("bash <<'EOF'\n{P}\nEOF", "the here-document fed to bash", "allow"),
    ("bash <<< '{P}'", "the here-string fed to bash", "allow"),
    ("source /dev/stdin <<< '{P}'", "the here-string fed to source", "allow"),
    ("eval '{P}'", "the string eval runs", "allow"),
    ("trap '{P}' EXIT", "the trap handler", "allow"),
    ("mapfile -C '{P} #' -c 1 <<< line", "the callback of mapfile -C", "allow"),
    ("find . -maxdepth 0 -exec sh -c '{P}' \\;", "the command of find -exec -> the script of sh -c",
     "allow"),
    ("echo x | xargs -I{{}} sh -c '{P}'", "the script of sh -c", "allow"),
    ("printf 'line\\n' > f && sed -n '1e {P}' f", "the e command of sed", "allow"),
    ("awk 'BEGIN {{ system(\"{P}\") }}'", "a command awk runs", "allow"),
    ("flock lockfile -c '{P}'", "the command of flock -c", "allow"),
    ("env -S 'bash -c \"{P}\"'", "the script of bash -c", "allow"),
    ("git -c alias.x='!{P}' x", "the value of alias.x (git -c)", "allow"),
    ("bash -c \"PS4='\\$({P})'; set -x; true\" 2>/dev/null", "the value of PS4", "allow"),
    ("echo $(( $({P}; echo 1) + 1 ))", "a command substitution", "allow"),
    ("python3 -c \"import os; os.system('{P}')\"", "python3 -c (Python code)", "ask"),
    ("perl -e 'system(\"{P}\")'", "perl -e (Perl code)", "ask"),
    ("echo '{P}' | bash", "bash reading a script from the output of", "ask"),
    # review 2226: long options cut short, start-up files bash expands, programs from stdin
    ("BASH_ENV='$({P})' bash -c true", "the value of BASH_ENV", "allow"),
    ("tar cf /dev/null --checkpoint=1 --checkpoint-act=exec='{P}' /dev/null",
     "the checkpoint action of tar", "allow"),
    ("awk -f /dev/stdin <<< 'BEGIN {{ system(\"{P}\") }}'", "a command awk runs", "allow"),
    ("printf 'line\\n' > f && sed -n -f - f <<< '1e {P}'", "the e command of sed", "allow"),
    ("make --eva='x:=$(shell {P})' -f /dev/null 2>/dev/null; true", "make --eval", "ask"),
]


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BwrapSandbox, ToolContext]]:
    ws = str(tmp_path_factory.mktemp("routes").resolve())
    sandbox = BwrapSandbox(ws, SandboxSettings(kill_grace_s=1.0))
    (Path(ws) / ".git").mkdir()
    yield sandbox, ToolContext(workspace=Workspace(ws), sandbox=sandbox)
    sandbox.close()


def decide(command: str, root: str) -> tuple[str, str, str]:
    d = PolicyEngine(PolicySettings(mode="auto")).decide(
        Bash(), {"command": command, "description": "route"}, root)
    return d.verdict, d.decided_by, d.reason


@pytest.mark.parametrize("template, route, harmless", ROUTES, ids=[r[0][:40] for r in ROUTES])
def test_the_route_runs_code_for_real_and_policy_asks_before_it_deletes(
        shell: tuple[BwrapSandbox, ToolContext], template: str, route: str, harmless: str) -> None:
    sandbox, ctx = shell
    ws = Path(sandbox.workspace)
    marker = "marker_" + str(abs(hash(template)))
    sandbox.cwd = sandbox.workspace
    if template.startswith("git "):
        run_tool(Bash(), {"command": "rm -rf .git && git init -q .", "description": "git"}, ctx)
    result = run_tool(Bash(), {"command": template.format(P=f"touch {marker}"),
                               "description": "route"}, ctx)
    assert (ws / marker).exists(), f"the route did not run its payload: {result.content}"
    verdict, _, reason = decide(template.format(P=f"touch {marker}"), str(ws))
    assert verdict == harmless, reason
    verdict, by, reason = decide(template.format(P="rm -rf victim"), str(ws))
    assert verdict == "ask", reason
    assert by in ("destructive", "opaque"), reason
    assert route in reason, reason


def test_rm_r_without_f_takes_a_whole_tree_with_no_question_when_there_is_no_terminal(
        shell: tuple[BwrapSandbox, ToolContext]) -> None:
    sandbox, ctx = shell
    ws = Path(sandbox.workspace)
    tree = ws / "tree" / "deep"
    tree.mkdir(parents=True)
    (tree / "readonly.txt").write_text("kept?\n")
    (tree / "readonly.txt").chmod(0o444)
    result = run_tool(Bash(), {"command": "rm -r tree", "description": "rm -r"}, ctx)
    assert result.ok, result.content
    assert not (ws / "tree").exists(), "rm -r asked nobody and took the tree"
    assert decide("rm -r tree", str(ws))[:2] == ("ask", "destructive")


def test_a_long_option_cut_short_is_the_option_it_begins(
        shell: tuple[BwrapSandbox, ToolContext]) -> None:
    """getopt_long takes a prefix: ``rm --r`` deletes a tree, ``git reset --ha`` resets (review 2226)."""
    sandbox, ctx = shell
    ws = Path(sandbox.workspace)
    (ws / "abbrev" / "deep").mkdir(parents=True)
    result = run_tool(Bash(), {"command": "rm --r abbrev", "description": "rm --r"}, ctx)
    assert result.ok and not (ws / "abbrev").exists(), result.content
    assert decide("rm --r abbrev", str(ws))[:2] == ("ask", "destructive")
