"""DESIGN.md's dependency arrows and the no-private-imports rule, held by an AST walk.

    appliance -> tools, models      tui -> appliance (and what it re-exports)
    installer -> bundle             nothing -> tui, installer

A module may import another package's public surface only: ``a.b._c`` is
importable from inside ``a.b`` (its own package and subpackages) and from
nowhere else.  Imports inside functions and ``TYPE_CHECKING`` blocks count
too, since they are dependencies all the same.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("appliance", "tools", "models", "bundle", "installer", "tui")
ALLOWED: dict[str, set[str]] = {
    "appliance": {"tools", "models"},
    "tools": set(),
    "models": set(),
    "bundle": set(),
    "installer": {"bundle"},
    "tui": {"appliance", "tools", "models"},
}
# Known, deliberate exceptions: (importing module, imported top-level package) -> why.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("appliance.cli.tui", "tui"): "`abhed tui` is the front door to the TUI; imported lazily in "
                                  "the verb, so nothing else in appliance sees tui",
    ("appliance.cli.bundle", "bundle"): "`abhed bundle` verbs drive the bundle package; lazily, "
                                        "in the verb only",
    ("bundle._gather", "models"): "`abhed bundle gather` hashes model weights and serve flags "
                                  "from the model presets; lazily, never on the installer's path",
}


def _modules() -> Iterator[tuple[str, Path]]:
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:  # `from a.b import _c` names a private module too
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield node.lineno, f"{node.module}.{alias.name}"


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
    for line, target in _imports(path):
        target_top = target.split(".")[0]
        where = f"{path.name}:{line}: {name} imports {target}"
        if target_top in PACKAGES and target_top != top and target_top not in ALLOWED[top] \
                and (name, target_top) not in EXCEPTIONS:
            found.append(f"{where} (the arrow {top} -> {target_top} is not in DESIGN.md)")
        owner = _private_owner(target)
        if owner is None or target_top not in PACKAGES:
            continue
        if not (name == owner or name.startswith(owner + ".")):
            found.append(f"{where} (a private module of {owner}; import from {owner})")
    return found


def _violations() -> list[str]:
    return [v for name, path in _modules() for v in _check(name, path)]


def test_design_arrows_and_no_private_cross_package_imports() -> None:
    assert _violations() == []


@pytest.mark.parametrize("source, expected", [
    ("from appliance.loop._agent import Agent\n", "private module of appliance.loop"),
    ("def f():\n    import tui\n", "appliance -> tui"),
    ("from installer import x\n", "appliance -> installer"),
    ("from tools import _result\n", "private module of tools"),
])
def test_the_checker_catches_what_it_should(tmp_path: Path, source: str, expected: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert any(expected in v for v in _check("appliance.mcp.probe", probe))


def test_a_package_may_use_its_own_private_modules(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from appliance.loop._agent import Agent\nfrom appliance._session import Session\n")
    assert _check("appliance.loop.probe", probe) == []
