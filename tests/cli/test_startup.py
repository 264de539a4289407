"""Start-up cost of the ``abhed`` command: what ``abhed --help`` may import.

Speed itself is measured by `benchmarks/waits.py --rows startup`, never asserted here; these
tests hold the structure that makes it fast: verbs load on use, and the
heavy libraries stay out of the help path.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import appliance
from cli import COMMANDS, load_command, main
from tests.helpers import ROOT

# Heavy or optional libraries no help screen needs (issue 16): each costs tens
# to hundreds of milliseconds to import, or is absent on a minimal install.
HEAVY = ("textual", "httpx", "vllm", "torch", "transformers", "mcp", "zstandard", "cryptography",
         "acp")
# What the runtime's verbs need, but the top-level help does not.
RUNTIME = ("pydantic", "sqlite_utils", "re2", "pathspec", "bashlex")


def _modules_after(*argv: str) -> set[str]:
    code = (
        "import sys, json\n"
        "from cli import main\n"
        "try:\n"
        f"    main({list(argv)!r}, prog_name='abhed')\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=True)
    return set(json.loads(out.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str], names: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in names)


def test_help_imports_no_heavy_module_and_no_verb() -> None:
    modules = _modules_after("--help")
    assert _heavy(modules, HEAVY + RUNTIME) == []
    ours = ("foundation", "appliance", "tools", "bundle", "models", "tui", "installer")
    assert not [m for m in modules if m.split(".")[0] in ours]
    assert not [m for m in modules if m.startswith("cli.")]


def test_verb_help_imports_only_that_verb() -> None:
    modules = _modules_after("events", "--help")
    assert "cli.events" in modules
    assert not {"cli.bundle", "cli.serve", "cli.run"} & modules
    assert _heavy(modules) == []


def test_version_imports_no_heavy_module() -> None:
    assert _heavy(_modules_after("--version"), HEAVY + RUNTIME) == []


def test_a_tool_call_imports_no_server_side_library(workspace: Path) -> None:
    # `abhed tool read` waits on its imports (docs/performance.md): the event store writes
    # through sqlite3 itself, and the model services' HTTP/1.1 server side (h11) loads on
    # their first exchange, never for a tool call.
    (workspace / "small.txt").write_text("hello\n")
    modules = _modules_after("tool", "read", json.dumps({"path": str(workspace / "small.txt")}),
                             "-w", str(workspace))
    assert "appliance.events._store" in modules  # the call ran and was recorded
    assert _heavy(modules, ("sqlite_utils", "h11", "textual", "httpx", "vllm", "mcp")) == []
    # One tool call is assembled by appliance.assembly alone: no agent is started, no
    # provider reached, no subagent spawner, probe or TUI built (whole agents are
    # appliance.compose's, which a tool call never imports), no agent loop (the settings'
    # `loop` section lives beside the schema), no auditor's join of the model
    # service's records (appliance.events.requests), none of the event log's maintenance
    # (appliance.events.maintenance: verify, export, repair, prune, the witness's collector;
    # "Seventh pass"), and none of models' servers: the scripted test server, the site's
    # relay and front, the bundle kit are public modules `models/__init__` does not import
    # (docs/performance.md, "Fifth pass").
    agent = ("appliance.compose", "appliance.tasks", "appliance.probe", "appliance.loop",
             "appliance.events.requests", "appliance.events.maintenance", "tui", "cli.rpc",
             "cli.run",
             "models.service", "models.scripted", "models.bundle_kit", "models._http11")
    assert sorted(m for m in modules if m.split(".")[0] in agent or
                  ".".join(m.split(".")[:2]) in agent or ".".join(m.split(".")[:3]) in agent) == []
    assert "appliance.assembly._tooling" in modules
    assert "models" in modules  # the settings' ProviderConfig and ServeSettings
    assert not {"http.server", "argparse", "socketserver"} & modules


def test_no_pydantic_plugin_of_an_installed_package_is_loaded(workspace: Path,
                                                              tmp_path: Path) -> None:
    """A distribution on the path that declares a `pydantic` entry point (the way plugins
    hook every validation) is never imported by a tool call: its import would leave a mark."""
    site = tmp_path / "site"
    info = site / "evil_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nevil = evil_plugin:plugin\n")
    mark = tmp_path / "loaded"
    (site / "evil_plugin.py").write_text(f"open({str(mark)!r}, 'w').close()\nplugin = object()\n")
    (workspace / "small.txt").write_text("hello\n")
    argv = [sys.executable, "-m", "cli", "tool", "read",
            json.dumps({"path": str(workspace / "small.txt")}), "-w", str(workspace)]
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert not mark.exists()
    # The same distribution is loaded by pydantic when the operator asks for plugins.
    env["PYDANTIC_DISABLE_PLUGINS"] = ""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False,
                          cwd=ROOT)
    assert mark.exists(), done.stderr


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_table_summary_is_the_commands_own(name: str) -> None:
    command = load_command(name)
    assert isinstance(command, click.Command)
    assert COMMANDS[name][1] == command.get_short_help_str(limit=10_000)


def test_help_lists_every_verb_once() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == sorted(COMMANDS)


@pytest.mark.parametrize("verb", ["nosuch", "", "../tool", "tool:tool", "x" * 100_000, "\x00", "run\n"])
def test_unknown_or_hostile_verb_is_a_usage_error(verb: str) -> None:
    result = CliRunner().invoke(main, [verb])
    assert result.exit_code == 2
    assert not [m for m in sys.modules if m.startswith("cli.") and verb in m and verb]


def test_load_command_unknown_is_none() -> None:
    assert load_command("nosuch") is None
    assert load_command("cli.tool:tool") is None


def test_no_package_loads_its_names_on_first_use() -> None:
    # No PEP 562 anywhere: the help path imports nothing of ours but `cli` (above), so every
    # package imports its names plainly and heavy third-party modules are imported where used.
    root = Path(__file__).resolve().parents[2]
    lazy = []
    for package in ("foundation", "appliance", "tools", "models", "bundle", "installer", "tui",
                    "cli"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            lazy += [f"{path.relative_to(root)}:{node.lineno}" for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__")
                     and node in _module_level(tree)]
    assert lazy == []
    assert set(appliance.__all__) <= set(vars(appliance))


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's own statements, including those under ``if``/``try`` at module level."""
    out: list[ast.stmt] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If | ast.Try):
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
    return out
