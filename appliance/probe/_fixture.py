"""The fixture repository: materialise a fresh copy for one case run.

The repository is data (``fixture.toml``: path -> content) rather than a
folder of ``.py`` files in the package, so no test runner, type checker or
packager mistakes it for part of Abhed.
"""

from __future__ import annotations

import secrets
import tomllib
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path

from appliance.probe._errors import ProbeError

__all__ = ["GENERATORS", "fixture_files", "materialise", "new_nonce", "render"]


def new_nonce() -> str:
    """A value no model can guess: 8 random digits, no leading zero (cases use it as a number)."""
    return str(10_000_000 + secrets.randbelow(90_000_000))


def render(text: str, workspace: str, nonce: str) -> str:
    return text.replace("{workspace}", workspace).replace("{nonce}", nonce)


def _long_log(nonce: str) -> str:
    lines = [f"step {i}: ok" for i in range(1, 2601)]
    lines[2399] = f"step 2400: ERROR code E{nonce}"
    return "\n".join(lines) + "\n"


GENERATORS: dict[str, Callable[[str], str]] = {"long_log": _long_log}


@cache
def fixture_files() -> dict[str, str]:
    try:
        raw = tomllib.loads((resources.files("appliance.probe") / "fixture.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProbeError(f"the probe's fixture repository cannot be read: {exc}; reinstall Abhed") from None
    files = raw.get("files", {})
    return {str(k): str(v).lstrip("\n") for k, v in files.items()}


def materialise(root: Path, nonce: str, files: dict[str, str], generate: dict[str, str]) -> None:
    """Write the fixture, then the case's own files and generated files, beneath ``root``."""
    ws = str(root)
    merged = dict(fixture_files())
    merged.update({render(k, ws, nonce): render(v, ws, nonce).lstrip("\n") for k, v in files.items()})
    for rel, gen in generate.items():
        if gen not in GENERATORS:
            raise ProbeError(f"unknown fixture generator {gen!r}")
        merged[render(rel, ws, nonce)] = GENERATORS[gen](nonce)
    for rel, content in merged.items():
        path = root / rel
        if path.resolve().parent != path.parent.resolve() or ".." in Path(rel).parts:
            raise ProbeError(f"fixture path {rel!r} leaves the workspace")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
