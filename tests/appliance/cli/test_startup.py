"""Start-up cost of the ``abhed`` command: what ``abhed --help`` may import.

Speed itself is measured by `benchmarks/waits.py --rows startup`, never asserted here; these
tests hold the structure that makes it fast: verbs load on use, and the
heavy libraries stay out of the help path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import appliance
from appliance.cli import COMMANDS, load_command, main

# Heavy or optional libraries no help screen needs (issue 16): each costs tens
# to hundreds of milliseconds to import, or is absent on a minimal install.
HEAVY = ("textual", "httpx", "vllm", "torch", "transformers", "mcp", "zstandard", "cryptography",
         "acp")
# What the runtime's verbs need, but the top-level help does not.
RUNTIME = ("pydantic", "sqlite_utils", "re2", "pathspec", "bashlex")


def _modules_after(*argv: str) -> set[str]:
    code = (
        "import sys, json\n"
        "from appliance.cli import main\n"
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
    assert not [m for m in modules if m.startswith("appliance.") and m != "appliance.cli"]
    assert not [m for m in modules if m.split(".")[0] in ("tools", "bundle", "models", "tui")]


def test_verb_help_imports_only_that_verb() -> None:
    modules = _modules_after("events", "--help")
    assert "appliance.cli.events" in modules
    assert not {"appliance.cli.bundle", "appliance.cli.serve", "appliance.cli.run"} & modules
    assert _heavy(modules) == []


def test_version_imports_no_heavy_module() -> None:
    assert _heavy(_modules_after("--version"), HEAVY + RUNTIME) == []


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
    assert not [m for m in sys.modules if m.startswith("appliance.cli.") and verb in m and verb]


def test_load_command_unknown_is_none() -> None:
    assert load_command("nosuch") is None
    assert load_command("appliance.cli.tool:tool") is None


def test_package_names_load_on_first_use() -> None:
    assert set(appliance.__all__) <= set(dir(appliance))
    for name in appliance.__all__:
        assert getattr(appliance, name) is not None
    with pytest.raises(AttributeError):
        appliance.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        appliance.__wrapped__  # noqa: B018


def test_root_exports_are_its_all_and_its_type_checking_imports() -> None:
    import ast
    import importlib

    exports = vars(appliance)["_MODULE_OF"]
    assert sorted(exports) == sorted(appliance.__all__)
    for name, source in exports.items():
        assert getattr(importlib.import_module(source), name) is getattr(appliance, name)
    # mypy reads the TYPE_CHECKING imports and the literal __all__; hold them to _EXPORTS too.
    tree = ast.parse(Path(appliance.__file__ or "").read_text())
    typed = {(node.module, alias.asname) for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.module != "__future__"
             for alias in node.names if alias.asname}
    assert typed == {(source, name) for name, source in exports.items()}
    assert "__all__ = [" in Path(appliance.__file__ or "").read_text()


@pytest.mark.parametrize("package", ["appliance.loop", "appliance.extensions", "appliance.sandbox",
                                     "appliance.mcp", "appliance.policy", "appliance.probe", "models"])
def test_subpackages_import_their_names_plainly(package: str) -> None:
    # Only the root is lazy (see appliance/__init__.py): a subpackage's names are there on import.
    import importlib

    module = importlib.import_module(package)
    assert not hasattr(module, "__getattr__")
    assert set(module.__all__) <= set(vars(module))
