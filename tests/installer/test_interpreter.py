"""The interpreter every engineer's abhed runs: root's alone, and runnable by all.

A Python only root can reach (a pyenv build under a 0700 /root) passes every check
when the installer runs as root and fails for each engineer afterwards; one an
engineer may replace undoes the site's settings.  Preflight refuses both.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from installer._preflight import interpreter_problem

SYSTEM = next((p for p in ("/usr/bin/python3", "/bin/python3") if os.path.exists(p)), None)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can reach (pytest's own tmp_path lies under a 0700 one)."""
    d = Path(tempfile.mkdtemp(prefix="abhed-interp-", dir="/var/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d)


def _copy(base: Path, dir_mode: int) -> Path:
    d = base / "py"
    d.mkdir()
    exe = d / "python3"
    shutil.copy(os.path.realpath(sys.executable), exe)
    os.chmod(exe, 0o755)
    os.chmod(d, dir_mode)
    return exe


@pytest.mark.skipif(SYSTEM is None, reason="no system python3 on this host")
def test_the_systems_python_is_fine() -> None:
    assert interpreter_problem(str(SYSTEM)) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership checks need root to set up")
def test_one_under_a_private_directory_is_refused(open_dir: Path) -> None:
    exe = _copy(open_dir, 0o700)
    problem = interpreter_problem(str(exe))
    assert problem is not None and "not searchable by other users" in problem
    assert str(exe.parent) in problem


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership checks need root to set up")
def test_one_an_engineer_owns_or_may_replace_is_refused(open_dir: Path) -> None:
    exe = _copy(open_dir, 0o755)
    os.chown(exe.parent, 4242, 4242)
    problem = interpreter_problem(str(exe))
    assert problem is not None and "belongs to uid 4242" in problem
    os.chown(exe.parent, 0, 0)
    os.chmod(exe.parent, 0o777)
    problem = interpreter_problem(str(exe))
    assert problem is not None and "writable by others (mode 0777)" in problem
    os.chmod(exe.parent, 0o755)
    os.chmod(exe, 0o750)
    problem = interpreter_problem(str(exe))
    assert problem is not None and "cannot be run by other users" in problem
    os.chmod(exe, 0o755)
    assert interpreter_problem(str(exe)) is None


def test_a_link_is_judged_by_what_it_points_at(open_dir: Path) -> None:
    link = open_dir / "python3"
    link.symlink_to(open_dir / "missing")
    problem = interpreter_problem(str(link))
    assert problem is not None and "missing" in problem
