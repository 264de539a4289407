"""Both engines, same answers, on real trees; the walker agrees with `git check-ignore`.

Trees: the running interpreter's standard library sources (hard-linked into a
temporary workspace, since the interpreter may live inside someone's ignored
folder), and a git repository built from those files with nested
``.gitignore`` files, negations, anchored and directory patterns,
``.git/info/exclude`` and a tracked-but-ignored file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import link_tree
from tools import ToolContext, ToolSettings, Workspace, run_tool
from tools._walk import walk_files
from tools.grep import Grep

pytestmark = pytest.mark.slow

PATTERNS: list[dict[str, Any]] = [
    {"pattern": "PyErr_SetString"},
    {"pattern": "deprecated", "case_insensitive": True},
    {"pattern": "(TODO|FIXME|XXX)"},
    {"pattern": r"[A-Z][a-z]+Error\b"},
    {"pattern": r"^\s*def __\w+__\(self"},
    {"pattern": r"[[:upper:]]{4,}_[[:digit:]]+"},
    {"pattern": r"\p{Greek}+"},
    {"pattern": r"caf[eé]|na[iï]ve|\x{FFFD}"},
    {"pattern": r"class \w+:\n\s+\"\"\"", "multiline": True},
    {"pattern": r"(?U)\(.+\)$"},
    {"pattern": r"import\s+(os|sys)\s*$", "case_insensitive": True},
]


@pytest.fixture(scope="module")
def stdlib_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("stdlib") / "lib"
    link_tree(sysconfig.get_paths()["stdlib"], dst)
    return dst.resolve()


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def git_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = (tmp_path_factory.mktemp("repo") / "repo").resolve()
    std = sysconfig.get_paths()["stdlib"]
    for sub in ("json", "email", "asyncio", "logging", "unittest", "xml"):
        link_tree(os.path.join(std, sub), root / "src" / sub)
    (root / "src" / "json" / "build").mkdir()
    (root / "src" / "json" / "build" / "gen.py").write_text("# TODO generated\n")
    (root / "logs").mkdir()
    for name in ("a.log", "keep.log", "debug.txt"):
        (root / "logs" / name).write_text("TODO log line\n")
    (root / "top.txt").write_text("anchored FIXME\n")
    (root / "src" / "top.txt").write_text("not anchored FIXME\n")
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "i.js").write_text("// TODO\n")
    (root / ".gitignore").write_text("*.log\n!keep.log\n/top.txt\nbuild/\n*.orig\n")
    (root / "src" / ".gitignore").write_text("# nested\n__init__.py\n!/json/__init__.py\nmime/\n")
    (root / "src" / "email" / ".gitignore").write_text("_*.py\n!_parseaddr.py\n")
    (root / "src" / "asyncio" / "tracked.orig").write_text("XXX tracked although ignored\n")
    _git(root, "init", "-q")
    (root / ".git" / "info" / "exclude").write_text("debug.txt\nxml/dom/\n")
    _git(root, "add", "-A")
    _git(root, "add", "-f", "src/asyncio/tracked.orig")
    _git(root, "commit", "-qm", "x")
    (root / "untracked.py").write_text("# FIXME untracked but not ignored\n")
    return root


def _all_files(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                out.append(os.path.relpath(p, root))
    return sorted(out)


def test_walker_agrees_with_git_check_ignore_on_every_file(git_tree: Path) -> None:
    files = _all_files(git_tree)
    ignored_out = _git(git_tree, "check-ignore", "--stdin", "-z",
                       stdin=b"\0".join(f.encode() for f in files) + b"\0")
    ignored = {p.decode() for p in ignored_out.split(b"\0") if p}
    excluded = ("node_modules/",)
    expected = {f for f in files if f not in ignored and not f.startswith(excluded)}
    ws = Workspace(str(git_tree))
    walked = {e.rel for e in walk_files(ws, str(git_tree), ToolSettings())}
    assert walked == expected
    assert "src/asyncio/tracked.orig" in walked  # tracked files stay, as git says
    assert "logs/keep.log" in walked and "logs/a.log" not in walked
    assert "src/json/__init__.py" in walked and "src/email/__init__.py" not in walked
    assert ignored >= {"top.txt", "logs/debug.txt", "src/json/build/gen.py"}


def test_scandir_walker_agrees_with_git_on_the_same_tree_without_git(git_tree: Path,
                                                                      tmp_path: Path) -> None:
    copy = (tmp_path / "copy").resolve()
    shutil.copytree(git_tree, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    ws = Workspace(str(copy))
    walked = {e.rel for e in walk_files(ws, ws.root, ToolSettings())}  # no .git: scandir walker
    _git(copy, "init", "-q")  # only now, so git can judge the same .gitignore files
    files = _all_files(copy)
    ignored_out = _git(copy, "check-ignore", "--no-index", "--stdin", "-z",
                       stdin=b"\0".join(f.encode() for f in files) + b"\0")
    ignored = {p.decode() for p in ignored_out.split(b"\0") if p}
    expected = {f for f in files if f not in ignored and not f.startswith("node_modules/")}
    assert walked == expected
    assert "logs/debug.txt" in walked  # .git/info/exclude is not in the copy


def _run(root: Path, engine: str, args: dict[str, Any]) -> Any:
    ctx = ToolContext(Workspace(str(root)), ToolSettings(grep_engine=engine))  # type: ignore[arg-type]
    result = run_tool(Grep(), args, ctx)
    assert result.ok, result.content
    assert result.details["engine"] == engine
    return result


@pytest.mark.parametrize("args", PATTERNS, ids=[p["pattern"][:24] for p in PATTERNS])
def test_engines_agree_on_the_standard_library(stdlib_tree: Path, args: dict[str, Any]) -> None:
    for mode in ("files_with_matches", "count", "content"):
        call = dict(args, output_mode=mode)
        if mode == "content":
            call["context"] = 1
        py = _run(stdlib_tree, "python", call)
        rg = _run(stdlib_tree, "ripgrep", call)
        assert py.content == rg.content, (mode, args)
        for key in ("matched_files", "binary_skipped", "files_searched", "binary_files"):
            assert py.details[key] == rg.details[key], (mode, key)
    assert py.details["files_searched"] > 1000


@pytest.mark.parametrize("args", PATTERNS[:6], ids=[p["pattern"][:24] for p in PATTERNS[:6]])
def test_engines_agree_on_a_git_repository_with_nested_ignores(git_tree: Path,
                                                               args: dict[str, Any]) -> None:
    for mode in ("files_with_matches", "count"):
        py = _run(git_tree, "python", dict(args, output_mode=mode))
        rg = _run(git_tree, "ripgrep", dict(args, output_mode=mode))
        assert py.content == rg.content
    todo = _run(git_tree, "python", {"pattern": "(TODO|FIXME|XXX)"}).content
    assert str(git_tree / "src/asyncio/tracked.orig") in todo
    assert str(git_tree / "untracked.py") in todo
    assert str(git_tree / "logs/a.log") not in todo and str(git_tree / "top.txt") not in todo
