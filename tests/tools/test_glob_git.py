"""glob agrees with git: every file of a real repository, checked with `git check-ignore`
and `git ls-files -co --exclude-standard`, and the same tree without `.git`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tools import ToolSettings

FILES = [
    "README.md", "app.log", "keep.log", "notes.txt", "build/out.bin", "build/sub/x.o",
    "src/main.py", "src/main.pyc", "src/build/gen.py", "src/debug.txt", "src/important.tmp",
    "src/a.tmp", "src/nested/deep/file.py", "src/nested/deep/local.cfg", "src/nested/deep/x.tmp",
    "docs/guide.md", "docs/draft/wip.md", "docs/draft/final.md", "rootonly.txt",
    "sub/rootonly.txt", "private/key.txt", "excluded_by_info.dat", "sub/excluded_by_info.dat",
    "space name.txt", "ünï.txt", "tracked_but_ignored.log", "a/b/c/d/e.py",
    "node_modules/pkg/index.js", "dist/bundle.js", "__pycache__/m.pyc", "target/debug/app",
]

GITIGNORES = {
    ".gitignore": "*.log\n!keep.log\n/build/\n*.pyc\n/rootonly.txt\nprivate\n# comment\n\n",
    "src/.gitignore": "*.tmp\n!important.tmp\ndebug.txt\nbuild\n",
    "src/nested/.gitignore": "deep/*.cfg\n",
    "src/nested/deep/.gitignore": "!x.tmp\n",
    "docs/.gitignore": "draft/*\n!draft/final.md\n",
}


def _git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", "-c", "core.quotePath=false", *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, check=False)


def _build(root: Path) -> None:
    for rel in FILES:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel + "\n")
    for rel, text in GITIGNORES.items():
        (root / rel).write_text(text)


def _all_files(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for f in filenames:
            out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(out)


def _excluded_by_default(rel: str) -> bool:
    return any(part in ToolSettings().default_excludes for part in rel.split("/")[:-1])


def _glob_all(h: Any, path: Path | None = None) -> set[str]:
    res = h.ok(h.glob("**", path))
    return {os.path.relpath(p, h.root) for p in res.content.splitlines() if not p.startswith("[")}


def _git_not_ignored(repo: Path, files: list[str]) -> set[str]:
    out = _git(repo, "check-ignore", "--stdin", stdin="\n".join(files) + "\n")
    assert out.returncode in (0, 1), out.stderr
    ignored = set(out.stdout.splitlines())
    return {f for f in files if f not in ignored}


@pytest.fixture
def repo(workspace: Path) -> Path:
    _build(workspace)
    assert _git(workspace, "init", "-q").returncode == 0
    (workspace / ".git" / "info").mkdir(exist_ok=True)
    (workspace / ".git" / "info" / "exclude").write_text("excluded_by_info.dat\n")
    _git(workspace, "add", "README.md", "src/main.py")
    _git(workspace, "add", "-f", "tracked_but_ignored.log")
    assert _git(workspace, "commit", "-q", "-m", "init").returncode == 0
    return workspace


def test_glob_agrees_with_git_check_ignore_on_every_file(h: Any, repo: Path) -> None:
    files = _all_files(repo)
    got = _glob_all(h)
    expected = {f for f in _git_not_ignored(repo, files) if not _excluded_by_default(f)}
    # Sanity: the tree really exercises every rule kind.
    assert "keep.log" in expected and "app.log" not in expected  # negation
    assert "sub/rootonly.txt" in expected and "rootonly.txt" not in expected  # anchored
    assert "src/build/gen.py" not in expected and "build/out.bin" not in expected  # dir patterns
    assert "src/nested/deep/x.tmp" in expected and "src/a.tmp" not in expected  # nested negation
    assert "docs/draft/final.md" in expected and "docs/draft/wip.md" not in expected
    assert "excluded_by_info.dat" not in expected and "sub/excluded_by_info.dat" not in expected
    assert "tracked_but_ignored.log" in expected  # tracked files are not subject to ignores
    assert "src/nested/deep/local.cfg" not in expected
    assert got == expected
    for f in files:  # and file by file, so a failure names the file
        assert (f in got) == (f in expected), f


def test_glob_agrees_with_git_ls_files(h: Any, repo: Path) -> None:
    out = _git(repo, "ls-files", "-co", "--exclude-standard")
    listed = {f for f in out.stdout.splitlines() if not _excluded_by_default(f)}
    assert _glob_all(h) == listed


def test_glob_from_a_subdirectory_of_a_repo(h: Any, repo: Path) -> None:
    got = _glob_all(h, repo / "src")
    expected = {f for f in _git_not_ignored(repo, _all_files(repo)) if f.startswith("src/")}
    assert got == expected


def test_deleted_tracked_file_is_not_listed(h: Any, repo: Path) -> None:
    os.unlink(repo / "src" / "main.py")
    assert "src/main.py" not in _glob_all(h)


def test_same_tree_without_git_gives_the_same_answer(h: Any, workspace: Path) -> None:
    _build(workspace)
    without_git = _glob_all(h)
    assert not (workspace / ".git").exists()
    # Ask git about the same tree afterwards (no info/exclude, nothing tracked).
    assert _git(workspace, "init", "-q").returncode == 0
    files = _all_files(workspace)
    expected = {f for f in _git_not_ignored(workspace, files) if not _excluded_by_default(f)}
    assert without_git == expected
    for f in files:
        assert (f in without_git) == (f in expected), f


def test_operator_ignore_list_applies_inside_a_repo(h: Any, repo: Path) -> None:
    op = h.with_settings(ignore=("docs/", "*.md"))
    got = _glob_all(op)
    assert not any(f.startswith("docs/") or f.endswith(".md") for f in got)
    assert "src/main.py" in got


def test_gitignored_directory_contents_stay_hidden_when_searching_inside_it_without_git(
    h: Any, workspace: Path
) -> None:
    _build(workspace)
    shutil.rmtree(workspace / "docs")
    assert _glob_all(h, workspace / "build") == set()


TRICKY_FILES = [
    "logs/important.log", "logs/other.log", "x/cache/c.txt", "cache/top.txt", "out/a/b.txt",
    "out.txt", "a/z.txt", "a/m/n/z.txt", "a/m/y.txt", "#hash.txt", "trailing.txt", "lib.o",
    "lib.a", "keep.a", "doc/r.txt", "doc/sub/r.txt", "main.c", "src/main.c", "Mixed.TXT",
    "dir_only/f", "file_named_dir_only", "q/dir_only", "esc[1].txt", "star*.txt",
]
TRICKY_IGNORE = (
    "logs/\n!logs/important.log\n**/cache\nout/**\na/**/z.txt\n\\#hash.txt\ntrailing.txt   \n"
    "*.[oa]\n!keep.a\ndoc/*.txt\n/*.c\n*.TXT\ndir_only/\nesc\\[1\\].txt\nstar\\*.txt\n"
)


@pytest.mark.parametrize("with_git", [True, False], ids=["git", "no-git"])
def test_tricky_gitignore_patterns_agree_with_git(h: Any, workspace: Path, with_git: bool) -> None:
    for rel in TRICKY_FILES:
        p = workspace / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x\n")
    (workspace / ".gitignore").write_text(TRICKY_IGNORE)
    if with_git:
        assert _git(workspace, "init", "-q").returncode == 0
    got = _glob_all(h)
    if not with_git:
        assert _git(workspace, "init", "-q").returncode == 0
    files = _all_files(workspace)
    expected = _git_not_ignored(workspace, files)
    assert "logs/important.log" not in expected  # a file in an excluded directory stays out
    mismatches = {f: ("glob lists it" if f in got else "glob hides it") for f in files
                  if (f in got) != (f in expected)}
    assert mismatches == {}
