"""vllm-router's wheels (``router/`` in the bundle, the model role's when the site declares a
router) go into a venv of their own, ``release/router-venv``, whose Python the router's
unit runs: never into the release's venv, whose pins (vLLM's) they do not share
(installer._release.build_venv).  Real pip, offline and hash-checked, with real tiny
wheels; the bundle's own pip from the installer tests' wheelhouse.  About 8 s of CPU: the real
router wheel is not installed here (its 29 wheels would take far longer); that its
command imports is tests/models/test_router_real.py's.  The router's wheels are installed
with ``--require-hashes`` from their own hash-locked list, by the same code as the others
(whose refusal of a wrong hash the installer's bundle tests hold)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from installer._layout import Layout
from installer._release import _requirements, build_venv
from installer._services import ROUTER_VENV
from tests.helpers import make_wheel


def _member(release: Path, name: str) -> Any:
    digest = hashlib.sha256((release / "bundle" / name).read_bytes()).hexdigest()
    return SimpleNamespace(name=name, content_sha256=digest)


def _version(python: Path, module: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({module!r}))"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          check=False).stdout.strip() or "absent"


def test_the_router_gets_a_venv_of_its_own(tmp_path: Path, wheelhouse: Path) -> None:
    layout = Layout(tmp_path / "opt")
    layout.logs.mkdir(parents=True)
    release = layout.release(1)
    wheels, router = release / "bundle/wheels", release / "bundle/router"
    wheels.mkdir(parents=True)
    router.mkdir(parents=True)
    pip = sorted(wheelhouse.glob("pip-*.whl"))[-1]
    (wheels / pip.name).write_bytes(pip.read_bytes())
    # The same distribution at two versions: one venv could not hold both.
    make_wheel(wheels, "shared", "1.0", {"shared/__init__.py": b"V = 1\n"})
    make_wheel(wheels, "demo", "1.0", {"demo/__init__.py": b""}, requires=("shared==1.0",))
    make_wheel(router, "shared", "2.0", {"shared/__init__.py": b"V = 2\n"})
    make_wheel(router, "vllm_router", "0.1.17", {"vllm_router/__init__.py": b""},
               requires=("shared==2.0",))
    members = [_member(release, f"{d}/{p.name}") for d in ("wheels", "router")
               for p in sorted((release / "bundle" / d).glob("*.whl"))]
    manifest: Any = SimpleNamespace(members=members,
                                    platform=SimpleNamespace(accelerator="cpu", python="3.11"))
    reqs, dirs = _requirements(manifest)
    assert "vllm-router" not in reqs and dirs == ["wheels"]
    reqs, dirs = _requirements(manifest, router=True)
    assert reqs.startswith("shared==2.0 --hash=sha256:") and dirs == ["router"]
    build_venv(layout, release, manifest, sys.executable, lambda s: None)
    main, own = release / "venv/bin/python", release / ROUTER_VENV / "bin/python"
    assert (_version(main, "shared"), _version(main, "vllm_router")) == ("1.0", "absent")
    assert (_version(own, "shared"), _version(own, "vllm_router")) == ("2.0", "0.1.17")
    assert "--hash=sha256:" in (release / "router-requirements.txt").read_text()
