"""The non-git walker's fast paths (issue 16) give exactly pathspec's answers.

The combined RE2 prefilter per ignore file and the cache of compiled ignore
files are speed only; these tests hold them to the exact matcher and to a
cache that notices every change.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pathspec
import pytest

from tools import ToolSettings, Workspace
from tools._walk import walk_files

PATTERNS = ["*.o", "!keep.o", "build/", "/top.txt", "a/**/b", ".*", "!.gitignore", "doc/*.md",
            "**/gen", "x?y", "[ab]c", "\\#lit", "trail\\ ", "!/build/keep", "deep/er/", "*.py[cod]",
            "", "# comment", "!", "\\!bang", "**", "*/", "name/**", "sub/*/leaf"]
NAMES = ["a.o", "keep.o", "build", "top.txt", "b", "gen", "xay", "ac", "bc", "#lit", "trail ",
         ".hidden", ".gitignore", "doc", "x.md", "deep", "er", "f.pyc", "f.py", "!bang", "leaf",
         "sub", "name", "plain.txt", "é.txt"]


def _listing(root: Path) -> list[str]:
    ws = Workspace(str(root))
    return sorted(e.rel for e in walk_files(ws, ws.root, ToolSettings(default_excludes=[])))


def _reference(root: Path) -> list[str]:
    """The same walk with pathspec's exact check on every path (the walker before issue 16)."""
    out: list[str] = []

    def visit(directory: Path, rel: str, specs: list[tuple[str, pathspec.GitIgnoreSpec]]) -> None:
        gi = directory / ".gitignore"
        if gi.is_file():
            lines = gi.read_text(errors="replace").splitlines()
            lines = [line for line in lines if _valid(line)]
            if lines:
                specs = specs + [(rel, pathspec.GitIgnoreSpec.from_lines(lines))]
        for entry in os.scandir(directory):
            child = f"{rel}/{entry.name}" if rel else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            verdict = None
            for base, spec in specs:
                sub = child[len(base) + 1:] if base else child
                res = spec.check_file(sub + "/" if is_dir else sub).include
                if res is not None:
                    verdict = res
            if verdict:
                continue
            if is_dir:
                visit(Path(entry.path), child, specs)
            elif entry.is_file(follow_symlinks=False):
                out.append(child)

    visit(root, "", [])
    return sorted(out)


def _valid(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("seed", range(12))
def test_random_trees_match_pathspec_exactly(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "t"
    dirs = [root]
    root.mkdir()
    for _ in range(40):
        parent = rng.choice(dirs)
        child = parent / rng.choice(NAMES)
        if child.exists():
            continue
        if rng.random() < 0.35 and len(child.relative_to(root).parts) < 5:
            child.mkdir()
            dirs.append(child)
        else:
            child.write_text("x\n")
    for d in rng.sample(dirs, k=min(len(dirs), 4)):
        if (d / ".gitignore").is_dir():
            continue
        (d / ".gitignore").write_text("\n".join(rng.sample(PATTERNS, k=rng.randint(1, 8))) + "\n")
    assert _listing(root) == _reference(root)


def test_invalid_pattern_line_is_skipped_like_git(tmp_path: Path) -> None:
    # A lone '!' made pathspec raise, and the raise failed every grep and glob.
    (tmp_path / ".gitignore").write_text("!\nfoo\ntrailing\\\n")
    (tmp_path / "foo").write_text("x")
    (tmp_path / "bar").write_text("x")
    assert _listing(tmp_path) == [".gitignore", "bar"]


def test_changed_ignore_file_is_seen_on_the_next_call(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("x")
    (tmp_path / "b.txt").write_text("x")
    gi = tmp_path / ".gitignore"
    gi.write_text("*.log\n")
    assert _listing(tmp_path) == [".gitignore", "b.txt"]
    gi.write_text("*.txt\n")  # same size: the change time and inode must tell
    assert _listing(tmp_path) == [".gitignore", "a.log"]
    gi.unlink()
    assert _listing(tmp_path) == ["a.log", "b.txt"]
    gi.write_text("")
    assert _listing(tmp_path) == [".gitignore", "a.log", "b.txt"]


def test_hostile_ignore_files_do_not_hang_or_crash(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / ".gitignore")  # opening it for reading would block forever
    (fifo_dir / "f.txt").write_text("x")
    dir_dir = tmp_path / "isdir"
    (dir_dir / ".gitignore").mkdir(parents=True)
    binary = tmp_path / "bin"
    binary.mkdir()
    (binary / ".gitignore").write_bytes(b"\xff\xfe*\x00\n\x80.txt\n")
    (binary / "z.txt").write_text("x")
    huge = tmp_path / "huge"
    huge.mkdir()
    (huge / ".gitignore").write_text("".join(f"name{i}[a-z]*/**/x{i}\n" for i in range(2_000)))
    (huge / "name7q").mkdir()
    (huge / "name7q" / "x7").write_text("x")
    (huge / "other.txt").write_text("x")
    got = _listing(tmp_path)
    assert got == ["bin/.gitignore", "bin/z.txt", "fifo/f.txt",
                   "huge/.gitignore", "huge/other.txt", "keep.txt"]


def test_entries_stat_lazily_and_match_lstat(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hello")
    os.symlink(tmp_path / "f.txt", tmp_path / "link.txt")
    ws = Workspace(str(tmp_path))
    entries = list(walk_files(ws, ws.root, ToolSettings()))
    assert [e.rel for e in entries] == ["f.txt"]  # symlinks are never listed
    assert entries[0].st.st_size == 5 == os.lstat(entries[0].path).st_size
