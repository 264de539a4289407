"""The distribution's shape: top-level packages, public surfaces, entry point."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

import pytest

OURS = ("foundation", "appliance", "tools", "models", "bundle", "installer", "tui", "cli")
ROOT = Path(__file__).resolve().parents[1]


def test_top_level_packages_exist_and_come_from_this_repo() -> None:
    for name in OURS:
        module = importlib.import_module(name)
        assert module.__file__ is not None, f"{name} is a namespace package: something shadows it"
        assert Path(module.__file__).resolve().parent == ROOT / name


def test_no_installed_distribution_ships_a_module_with_our_names() -> None:
    clashes: list[str] = []
    for dist in md.distributions():
        if dist.metadata["Name"] and dist.metadata["Name"].lower() == "abhed":
            continue
        top = dist.read_text("top_level.txt")
        names = set(top.split()) if top else set()
        for f in dist.files or ():
            parts = f.parts
            if parts and not parts[0].endswith((".dist-info", ".data")) and parts[0] != "..":
                names.add(parts[0].removesuffix(".py"))
        for name in OURS:
            if name in names:
                clashes.append(f"{dist.metadata['Name']} ships {name!r}")
    assert clashes == []


def _public_packages() -> list[str]:
    """Every package whose name has no private part: the top-level ones and their subpackages."""
    out = []
    for name in OURS:
        for init in sorted((ROOT / name).rglob("__init__.py")):
            parts = init.parent.relative_to(ROOT).parts
            if not any(p.startswith("_") for p in parts):
                out.append(".".join(parts))
    # cli's surface is the command line (docs/cli.md), not an import API.
    return [p for p in out if p != "cli"]


@pytest.mark.parametrize("package", _public_packages())
def test_public_surface_is_exactly_all(package: str) -> None:
    module = importlib.import_module(package)
    exported = set(getattr(module, "__all__", []))
    public = {n for n in vars(module) if not n.startswith("_")} - {"annotations"}
    submodules = {n for n in public if type(getattr(module, n)).__name__ == "module"}
    assert public - submodules == exported


def test_help_is_fast_to_import_and_lists_verbs() -> None:
    out = subprocess.run([sys.executable, "-m", "cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for verb in ("tool", "sessions", "events"):
        assert verb in out
    heavy = subprocess.run(
        [sys.executable, "-c", "import sys, cli; "
         "print(sorted(m for m in ('httpx','textual','vllm','torch') if m in sys.modules))"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert heavy == "[]"
