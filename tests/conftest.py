"""Keep the developer's machine out of every test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGES = ("foundation", "appliance", "tools", "models", "bundle", "installer", "tui", "cli")


def pytest_configure(config: pytest.Config) -> None:
    """Let every Python the tests start keep bytecode, in one cache outside the checkout.

    The machine's environment sets ``PYTHONDONTWRITEBYTECODE=1`` and the checkout holds no
    ``__pycache__``, so each of the suite's hundreds of ``python -m cli`` / ``abhed``
    children recompiled every module it imports: about 0.4 s CPU of a 1.4 s start.  With
    ``PYTHONPYCACHEPREFIX`` the bytecode goes to ``$ABHED_CACHE/pycache`` (keyed there by
    each source's full path, checked against its mtime and size as usual), never into the
    checkout or an installed release; what a test runs as another user cannot write there
    and compiles as before.  The installer's children drop every ``PYTHON*`` variable.
    """
    cache = Path(os.environ.get("ABHED_CACHE") or Path.home() / ".cache" / "abhed") / "pycache"
    cache.mkdir(parents=True, exist_ok=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(cache))
    sys.dont_write_bytecode = False
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once when the venv cannot import every package from outside the checkout.

    An editable install maps each top-level package by name when it is made, so a
    package added since (``foundation``) is missing to every ``abhed`` subprocess
    until ``scripts/setup`` runs again: say that once, not in a hundred failures.
    """
    code = f"import importlib.util as u; print(*[p for p in {PACKAGES!r} if not u.find_spec(p)])"
    probe = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True,
                           text=True, check=False, timeout=60)
    missing = probe.stdout.split() if probe.returncode == 0 else [probe.stderr.strip()]
    if missing:
        pytest.exit(f"this venv predates a package of the checkout ({', '.join(missing)}: the "
                    "installed `abhed` cannot import it); run scripts/setup, then the tests "
                    "again", returncode=4)


# The test command (scripts/test) runs two pytest-xdist workers with ``--dist loadgroup``:
# each group below runs whole on one worker, in order, and a worker that runs out of work
# takes the next group.  Groups are the units that share something within a process:
# a folder's session- and module-scoped fixtures (the installer's bundles, the site's
# namespaces), and every module that uses the one suite vLLM (tests/vllm_server.py, a
# global per process; a second worker using it would start a second vLLM).  The longest
# groups are handed out first, so that the 2 cores stay busy to the end.
_FIRST = ("e2e", "installer", "vllm", "site", "bundle")


def _group(item: pytest.Item) -> str:
    path = Path(str(item.path)).relative_to(Path(__file__).parent)
    if "vllm" in path.name or path.name == "test_benchmarks.py":
        return "vllm"
    if path.name == "test_appliance_e2e.py":
        return "e2e"
    return "-".join(path.parts[:2]) if len(path.parts) > 2 else path.parts[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, mark each test with its group and order the groups longest first."""
    if not hasattr(config, "workerinput"):
        return  # a plain run keeps the collection's order
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    first = {name: rank for rank, name in enumerate(_FIRST)}
    items.sort(key=lambda item: first.get(_group(item), len(first)))


@pytest.fixture(autouse=True)
def abhed_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point ABHED_HOME at a fresh temp dir for every test."""
    home = tmp_path_factory.mktemp("abhed-home")
    monkeypatch.setenv("ABHED_HOME", str(home))
    yield home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory (its real path, symlinks resolved)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()
