"""grep held to ripgrep's own behaviour where issue 22 found it differed, on both engines,
inside and outside a git work tree, with git and a real ``rg`` as the oracles:

* a ``.gitignore`` re-include below ``dir/**`` (``!vendor/manifest``) is searched;
* a UTF-8 byte-order mark is not part of line 1 (as ``read`` shows the file), and a
  UTF-16 file is searched as its text;
* ``.ignore`` and ``.rgignore`` are honoured with ripgrep's precedence, by grep and glob;
* a NUL byte makes a file binary only within its first 8 KiB, in both engines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools import ToolContext, ToolResult, ToolSettings, Workspace, run_tool
from tools.glob import Glob
from tools.grep import Grep
from tools.read import Read

pytestmark = pytest.mark.slow  # real rg and git as oracles (about 4 s)

RG = os.path.join(os.path.dirname(sys.executable), "rg")


@pytest.fixture(params=["python", "ripgrep"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["outside git", "inside git"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    if request.param == "inside git":
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def write(root: Path, rel: str, data: bytes | str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def grep(root: Path, engine: str, **args: Any) -> ToolResult:
    ctx = ToolContext(workspace=Workspace(str(root)), settings=ToolSettings(grep_engine=engine))
    return run_tool(Grep(), {"path": str(root), **args}, ctx)


def files(result: ToolResult, root: Path) -> list[str]:
    return sorted(os.path.relpath(p, root) for p in result.content.splitlines()
                  if p.startswith("/"))


def globbed(root: Path) -> list[str]:
    ctx = ToolContext(workspace=Workspace(str(root)))
    r = run_tool(Glob(), {"pattern": "**/*", "path": str(root)}, ctx)
    return sorted(os.path.relpath(p, root) for p in r.content.splitlines() if p.startswith("/"))


def rg_files(root: Path) -> list[str]:
    """ripgrep's own list: its walker, its ignore files, git's rules even outside git."""
    out = subprocess.run([RG, "--files", "--hidden", "--no-require-git", "--no-config", "-g", "!.git"],
                         cwd=root, capture_output=True, check=False)
    return sorted(out.stdout.decode().split())


# -- .gitignore: a re-include below dir/** ---------------------------------------------

def _vendor(root: Path) -> None:
    write(root, ".gitignore", "vendor/**\n!vendor/manifest\n")
    write(root, "vendor/manifest", "needle in the manifest\n")
    write(root, "vendor/lib.c", "needle in the library\n")
    write(root, "vendor/sub/manifest", "needle one level down\n")
    write(root, "src/app.c", "needle in the app\n")


def test_a_reinclude_below_dir_star_star_is_searched_as_git_and_ripgrep_do(tree: Path,
                                                                            engine: str) -> None:
    _vendor(tree)
    r = grep(tree, engine, pattern="needle")
    assert files(r, tree) == ["src/app.c", "vendor/manifest"], r.content
    assert [f for f in rg_files(tree) if "needle" in (tree / f).read_text()] == files(r, tree)
    if (tree / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=tree,
                                capture_output=True, text=True, check=True).stdout.split()
        assert "vendor/manifest" in listed and "vendor/lib.c" not in listed


def test_dir_star_star_slash_ignores_the_directories_inside_not_the_files(tree: Path,
                                                                          engine: str) -> None:
    write(tree, ".gitignore", "vendor/**/\n")
    write(tree, "vendor/top.c", "needle\n")
    write(tree, "vendor/sub/deep.c", "needle\n")
    r = grep(tree, engine, pattern="needle")
    assert files(r, tree) == ["vendor/top.c"]
    assert rg_files(tree) == [".gitignore", "vendor/top.c"]


def test_glob_lists_what_grep_searches_under_the_same_ignore_files(tree: Path) -> None:
    _vendor(tree)
    write(tree, ".ignore", "src/\n")
    assert globbed(tree) == [".gitignore", ".ignore", "vendor/manifest"]
    assert files(grep(tree, "python", pattern="needle"), tree) == ["vendor/manifest"]


# -- the byte-order mark -------------------------------------------------------------------

def test_a_utf8_bom_is_not_part_of_line_one_in_either_engine(tree: Path, engine: str) -> None:
    bom = write(tree, "bom.txt", b"\xef\xbb\xbftest123\nsecond test123\n")
    r = grep(tree, engine, pattern="^test123", output_mode="content")
    assert r.content == f"{bom}:1:test123", r.content
    assert "\ufeff" not in r.content
    r = grep(tree, engine, pattern=r"\Atest123", multiline=True, output_mode="content")
    assert r.content == f"{bom}:1:test123"
    r = grep(tree, engine, pattern="test123", output_mode="count")
    assert r.content == f"{bom}:2"
    # what grep prints is what read shows, so it can go straight into edit
    shown = run_tool(Read(), {"path": str(bom)}, ToolContext(workspace=Workspace(str(tree))))
    assert "test123" in shown.content and "\ufeff" not in shown.content


def test_a_utf16_file_is_searched_as_the_text_it_encodes(tree: Path, engine: str) -> None:
    le = write(tree, "le.txt", "\ufefftest123 caf\u00e9\nline two\n".encode("utf-16-le"))
    be = write(tree, "be.txt", "\ufeffnothing\ntest123\n".encode("utf-16-be"))
    r = grep(tree, engine, pattern="^test123", output_mode="content")
    assert r.content.splitlines() == [f"{be}:2:test123", "--", f"{le}:1:test123 caf\u00e9"]
    assert r.details["binary_skipped"] == 0


def test_a_utf32_file_counts_as_binary_in_both_engines(tree: Path, engine: str) -> None:
    write(tree, "wide.txt", "\ufefftest123\n".encode("utf-32-le"))
    write(tree, "plain.txt", "test123\n")
    r = grep(tree, engine, pattern="t", output_mode="files_with_matches")
    assert files(r, tree) == ["plain.txt"]


# -- binary detection ------------------------------------------------------------------------

def test_a_nul_after_the_first_8_kib_leaves_the_file_text_in_both_engines(tree: Path,
                                                                          engine: str) -> None:
    late = write(tree, "late.log", b"needle first\n" + b"x" * 9000 + b"\n\x00\nneedle after\n")
    write(tree, "early.bin", b"needle\x00")
    r = grep(tree, engine, pattern="needle", output_mode="content")
    assert r.content.splitlines()[:2] == [f"{late}:1:needle first", f"{late}:4:needle after"]
    assert r.details["binary_skipped"] == 1


# -- .ignore and .rgignore ------------------------------------------------------------------------

def test_ignore_and_rgignore_are_honoured_with_ripgreps_precedence(tree: Path, engine: str) -> None:
    write(tree, ".ignore", "generated/\n*.snap\n!keep.snap\n")
    write(tree, ".rgignore", "!generated/\nlocal.txt\n")
    write(tree, "generated/out.txt", "needle\n")
    write(tree, "a.snap", "needle\n")
    write(tree, "keep.snap", "needle\n")
    write(tree, "local.txt", "needle\n")
    write(tree, "sub/.ignore", "!a.snap\nnested.txt\n")
    write(tree, "sub/a.snap", "needle\n")
    write(tree, "sub/nested.txt", "needle\n")
    write(tree, "sub/other.txt", "needle\n")
    r = grep(tree, engine, pattern="needle")
    expect = ["generated/out.txt", "keep.snap", "sub/a.snap", "sub/other.txt"]
    assert files(r, tree) == expect, r.content
    assert [f for f in rg_files(tree) if not f.endswith("ignore")] == expect


def test_a_negation_in_ignore_beats_gitignore_outside_git(tmp_path: Path, engine: str) -> None:
    root = (tmp_path / "plain").resolve()
    write(root, ".gitignore", "*.gen.py\n")
    write(root, ".ignore", "!api.gen.py\n")
    write(root, "api.gen.py", "needle\n")
    write(root, "other.gen.py", "needle\n")
    r = grep(root, engine, pattern="needle")
    assert files(r, root) == ["api.gen.py"]
    assert [f for f in rg_files(root) if f.endswith(".py")] == ["api.gen.py"]


def test_inside_git_ignore_files_only_take_away_from_gits_list(tmp_path: Path, engine: str) -> None:
    """Inside a work tree git's list is the base: .ignore can hide a file (tracked or not), but
    its negation does not bring back one git ignores (ripgrep would; docs/grep.md says why)."""
    root = (tmp_path / "repo").resolve()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root, ".gitignore", "*.gen.py\n")
    write(root, ".ignore", "!api.gen.py\nfixtures/\n")
    write(root, "api.gen.py", "needle\n")
    write(root, "fixtures/big.json", "needle\n")
    write(root, "src/main.py", "needle\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    r = grep(root, engine, pattern="needle")
    assert files(r, root) == ["src/main.py"]
