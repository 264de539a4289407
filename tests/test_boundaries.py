"""The package arrows (docs/architecture.md) and the no-private-imports rule, held by an AST walk.

    foundation -> nothing of ours      tools, models -> foundation
    bundle -> foundation               installer -> bundle, foundation
    appliance -> tools, models, foundation
    tui -> appliance, tools, models, foundation
    cli -> tui, appliance, bundle, models, tools, foundation
    nothing -> cli, installer

``cli`` holds the doors (the ``abhed`` command, rpc): it stands above the
runtime, so nothing below imports it.

``foundation`` is the floor every package stands on (the strict loader, regular
files, digests, process groups; see docs/architecture.md), so it may import
nothing of ours.

A module may import another package's public surface only: ``a.b._c`` is
importable from inside ``a.b`` (its own package and subpackages) and from
nowhere else, and a private *name* (``from a.b._c import _helper``) is its
module's own: nothing else imports it.  Relative imports (``from .._x import
y``) are resolved first and held to the same rules, and so are the scripts in
``benchmarks/``, which stand outside every package and so may use public
surfaces only.  Imports inside functions and ``TYPE_CHECKING`` blocks count
too, since they are dependencies all the same.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("foundation", "appliance", "tools", "models", "bundle", "installer", "tui", "cli")
# Outside every package: may import any package's public surface, and no private module
# of a package or of the tests (``tests`` is checked as a target for them only).
SCRIPTS = ("benchmarks",)
ALLOWED: dict[str, set[str]] = {
    "foundation": set(),
    "appliance": {"tools", "models", "foundation"},
    "tools": {"foundation"},
    "models": {"foundation"},
    "bundle": {"foundation"},
    "installer": {"bundle", "foundation"},
    "tui": {"appliance", "tools", "models", "foundation"},
    "cli": {"tui", "appliance", "bundle", "models", "tools", "foundation"},
}
# Known, deliberate exceptions: (importing module, imported top-level package) -> why.
# None is left: the table above is the whole rule (docs/architecture.md).
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Iterator[tuple[str, Path]]:
    for top in PACKAGES + SCRIPTS:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield _module_name(path), path


def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve(name: str, is_package: bool, level: int, module: str | None) -> str:
    """``from ..x import y`` inside module ``name``: the absolute module it names."""
    parts = name.split(".")
    base = parts if is_package else parts[:-1]
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([module] if module else []))


def _names_find_spec(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "find_spec") \
        or (isinstance(func, ast.Name) and func.id == "find_spec")


def _imports(name: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported dotted name) for every import, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.Call) and _names_find_spec(node.func) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            # importlib.util.find_spec("a.b"): a file found by module name is a dependency
            # too (the image build copies the guest runner's file), held to the same arrows.
            yield node.lineno, node.args[0].value
        elif isinstance(node, ast.ImportFrom):
            source = node.module or "" if node.level == 0 else \
                _resolve(name, is_package, node.level, node.module)
            if not source:
                continue
            yield node.lineno, source
            for alias in node.names:  # `from a.b import _c` names a private module or name
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield node.lineno, f"{source}.{alias.name}"


def _private_owner(target: str) -> str | None:
    """For ``a.b._c.d``: ``a.b``, the package whose private module it is (``None``: all public)."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _check(name: str, path: Path) -> list[str]:
    found: list[str] = []
    top = name.split(".")[0]
    checked = PACKAGES + (("tests",) if top in SCRIPTS else ())
    for line, target in _imports(name, path):
        target_top = target.split(".")[0]
        where = f"{path.name}:{line}: {name} imports {target}"
        if top in ALLOWED and target_top in PACKAGES and target_top != top \
                and target_top not in ALLOWED[top] and (name, target_top) not in EXCEPTIONS:
            found.append(f"{where} (the arrow {top} -> {target_top} is not in docs/architecture.md's table)")
        if target_top not in checked:
            continue
        owner = _private_owner(target)
        if owner is None:
            continue
        head, _, last = target.rpartition(".")
        if last.startswith("_") and not last.startswith("__") and not _is_module(target):
            if head != name:
                found.append(f"{where} (a private name of {head}: make it public, or keep its "
                             "use inside that module)")
        elif not (name == owner or name.startswith(owner + ".")):
            found.append(f"{where} (a private module of {owner}; import from {owner})")
    return found


def _violations() -> list[str]:
    return [v for name, path in _modules() for v in _check(name, path)]


def test_design_arrows_and_no_private_cross_package_imports() -> None:
    assert _violations() == []


@pytest.mark.parametrize("name, source, expected", [
    ("appliance.mcp.probe", "from appliance.loop._agent import Agent\n",
     "private module of appliance.loop"),
    ("appliance.mcp.probe", "def f():\n    import tui\n", "appliance -> tui"),
    ("appliance.mcp.probe", "from installer import x\n", "appliance -> installer"),
    ("appliance.mcp.probe", "from tools import _result\n", "private module of tools"),
    ("foundation.probe", "from tools import Tool\n", "foundation -> tools"),
    ("models.probe", "from bundle import Manifest\n", "models -> bundle"),
    # the doors stand above everything: nothing below imports them
    ("appliance.mcp.probe", "from cli.rpc import RpcServer\n", "appliance -> cli"),
    ("tui.probe", "def f():\n    import cli\n", "tui -> cli"),
    ("installer.probe", "from cli import main\n", "installer -> cli"),
    ("cli.probe", "from installer import x\n", "cli -> installer"),
    ("cli.probe", "from appliance._errors import AbhedError\n", "private module of appliance"),
    # relative imports are resolved before they are judged
    ("installer._verbs.probe", "from .._health import _get\n",
     "a private name of installer._health"),
    ("appliance.mcp.probe", "from ..loop._agent import Agent\n",
     "private module of appliance.loop"),
    ("appliance.mcp.probe", "from ...tui import AbhedApp\n", "appliance -> tui"),
    # scripts outside the packages: public surfaces only, tests' private helpers included
    ("benchmarks.grep.run", "from tools._grep import find_rg\n", "private module of tools"),
    ("benchmarks.grep.run", "from tools.grep import _search\n", "a private name of tools.grep"),
    ("benchmarks.probe.wall", "from tests.models._vllm import shared_vllm\n",
     "private name of tests.models"),
    # a file found by module name is a dependency like an import
    ("bundle.image.probe", "import importlib.util\nimportlib.util.find_spec('appliance')\n",
     "bundle -> appliance"),
    ("bundle.image.probe", "from importlib.util import find_spec\nfind_spec('foundation._regular')\n",
     "private module of foundation"),
])
def test_the_checker_catches_what_it_should(tmp_path: Path, name: str, source: str,
                                            expected: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    found = _check(name, probe)
    assert any(expected in v for v in found), found


def test_a_package_may_use_its_own_private_modules(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from appliance.loop._agent import Agent\nfrom appliance._session import Session\n"
                     "from . import _agent\nfrom ._agent import Agent\n")
    assert _check("appliance.loop.probe", probe) == []


def test_the_doors_may_use_every_package_below_them(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import tui\nfrom appliance import Session\nfrom bundle import Manifest\n"
                     "from models import Delta\nfrom tools import Tool\nimport foundation\n"
                     "from cli._common import get_config\n")
    assert _check("cli.probe", probe) == []


def test_benchmarks_may_use_public_surfaces(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from tools.grep import Grep\nfrom appliance.sandbox import MicroVM\n"
                     "from tests.vllm_server import shared_vllm\nimport tui\n")
    assert _check("benchmarks.x", probe) == []


def _runtime_edges() -> dict[str, set[str]]:
    """module -> the modules of ours it imports when it runs (``TYPE_CHECKING`` blocks left out).

    A package's ``__init__`` is left out at both ends: re-exporting its own modules is
    what it is for, and a module importing its package's surface is not a cycle of code.
    """
    edges: dict[str, set[str]] = {}
    for name, path in _modules():
        if path.name == "__init__.py" or name.split(".")[0] in SCRIPTS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                source = node.module or "" if node.level == 0 else \
                    _resolve(name, False, node.level, node.module)
                found = [f"{source}.{a.name}" if _is_module(f"{source}.{a.name}") else source
                         for a in node.names]
            targets |= {t for t in found if t.split(".")[0] in PACKAGES and t != name
                        and ROOT.joinpath(*t.split(".")).with_suffix(".py").is_file()}
        edges[name] = targets
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of two or more modules (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_runtime_import_cycle() -> None:
    # installer._deploy <-> installer._stage was one: staging imported the shared steps from
    # the pipeline that runs it (now installer._steps, below both).
    assert _cycles(_runtime_edges()) == []


def test_the_cycle_finder_finds_one() -> None:
    assert _cycles({"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}) \
        == [["a.x", "a.y", "a.z"]]
