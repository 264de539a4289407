"""Listing the files glob and grep consider, with git's ignore rules.

Inside a git work tree the list comes from git itself
(``git ls-files --cached --others --exclude-standard``), so it agrees with
``git check-ignore`` by construction: nested ``.gitignore`` files, negation,
``.git/info/exclude`` and tracked-but-ignored files all behave as git says.
Elsewhere a ``scandir`` walker applies the ``.gitignore`` files it meets with
git's rules (pathspec's ``GitIgnoreSpec``), so a copied tree without ``.git``
gives the same answer.

On top of either come the operator's ignore list and the default excluded
directory names.  Hidden files are included (``.github/``, ``.env.example`` are
often exactly what an agent needs); secret paths are filtered by the caller.
Symlinks are never followed and never listed: a link can point anywhere, and
ripgrep without ``-L`` does the same.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pathspec

from tools._paths import Workspace
from tools._settings import ToolSettings

__all__ = ["WalkEntry", "walk_files"]


@dataclass(frozen=True, slots=True)
class WalkEntry:
    path: str  # absolute
    rel: str  # relative to the directory walked
    st: os.stat_result


class _Filters:
    def __init__(self, ws: Workspace, settings: ToolSettings) -> None:
        self.ws = ws
        self.excluded_names = frozenset(settings.default_excludes)
        self.operator = (
            pathspec.GitIgnoreSpec.from_lines(settings.ignore) if settings.ignore else None
        )

    def dir_excluded(self, name: str, abs_path: str) -> bool:
        if name in self.excluded_names:
            return True
        return self._operator(abs_path, is_dir=True)

    def file_excluded(self, abs_path: str) -> bool:
        return self._operator(abs_path, is_dir=False)

    def _operator(self, abs_path: str, *, is_dir: bool) -> bool:
        if self.operator is None:
            return False
        rel = self.ws.relative(abs_path)
        return bool(self.operator.match_file(rel + "/" if is_dir else rel))


def walk_files(ws: Workspace, start: str, settings: ToolSettings) -> Iterator[WalkEntry]:
    """Yield every regular file beneath ``start`` (an absolute directory), ignores applied.

    Order is unspecified; callers sort.
    """
    filters = _Filters(ws, settings)
    listed = _git_list(start, ws.root)
    if listed is not None:
        yield from _from_git(start, listed, filters)
    else:
        yield from _scan(start, filters)


def _git_list(start: str, root: str) -> list[str] | None:
    """Git's own file list for ``start``, or ``None`` when git's rules do not apply.

    They do not apply outside a work tree, and not when the workspace root is
    itself ignored by an enclosing repository (a project inside a dot-files
    repository that ignores ``*``, or inside pyenv's clone): that repository
    is not the project's, and honouring it would hide every file.
    """
    git = shutil.which("git")
    if git is None:
        return None
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    try:
        inside = subprocess.run(
            [git, "rev-parse", "--is-inside-work-tree", "--show-toplevel"], cwd=start, env=env,
            capture_output=True, timeout=30,
        )
        lines = inside.stdout.decode("utf-8", "surrogateescape").splitlines()
        if inside.returncode != 0 or not lines or lines[0] != "true":
            return None
        top = os.path.realpath(lines[1]) if len(lines) > 1 else ""
        if top and top != root and root.startswith(top.rstrip("/") + "/"):
            ignored = subprocess.run(
                [git, "check-ignore", "-q", "--", root], cwd=start, env=env,
                capture_output=True, timeout=30,
            )
            if ignored.returncode == 0:
                return None
        out = subprocess.run(
            [git, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--deduplicate"],
            cwd=start, env=env, capture_output=True, timeout=300,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return [p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _from_git(start: str, listed: list[str], filters: _Filters) -> Iterator[WalkEntry]:
    bad_dirs: dict[str, bool] = {}
    for rel in listed:
        parts = rel.split("/")
        skip = False
        prefix = start
        for comp in parts[:-1]:
            prefix = prefix + "/" + comp if prefix != "/" else "/" + comp
            verdict = bad_dirs.get(prefix)
            if verdict is None:
                verdict = filters.dir_excluded(comp, prefix)
                bad_dirs[prefix] = verdict
            if verdict:
                skip = True
                break
        if skip:
            continue
        path = os.path.join(start, rel)
        if filters.file_excluded(path):
            continue
        try:
            st = os.lstat(path)  # also drops tracked files deleted from the work tree
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            yield WalkEntry(path, rel, st)


def _scan(start: str, filters: _Filters) -> Iterator[WalkEntry]:
    # Each stack frame: directory path, its path relative to start, and the
    # ignore specs in force there (root first), each with its base dir.
    specs0 = _specs_for_ancestors(start, filters.ws)
    stack: list[tuple[str, str, list[tuple[str, pathspec.GitIgnoreSpec]]]] = [(start, "", specs0)]
    while stack:
        directory, rel_dir, specs = stack.pop()
        own = _load_gitignore(directory)
        if own is not None:
            specs = specs + [(directory, own)]
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = entry.name if not rel_dir else rel_dir + "/" + entry.name
            if stat.S_ISDIR(st.st_mode):
                if filters.dir_excluded(entry.name, entry.path):
                    continue
                if _ignored(specs, entry.path, is_dir=True):
                    continue
                stack.append((entry.path, rel, specs))
            elif stat.S_ISREG(st.st_mode):
                if _ignored(specs, entry.path, is_dir=False) or filters.file_excluded(entry.path):
                    continue
                yield WalkEntry(entry.path, rel, st)


def _ignored(specs: list[tuple[str, pathspec.GitIgnoreSpec]], path: str, *, is_dir: bool) -> bool:
    verdict: bool | None = None
    for base, spec in specs:
        # Every walked path lies beneath each spec's base (an ancestor), so a
        # slice gives the relative path; os.path.relpath cost more than the match.
        rel = path[len(base.rstrip("/")) + 1 :]
        result = spec.check_file(rel + "/" if is_dir else rel)
        if result.include is not None:
            verdict = result.include
    return bool(verdict)


def _load_gitignore(directory: str) -> pathspec.GitIgnoreSpec | None:
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _specs_for_ancestors(start: str, ws: Workspace) -> list[tuple[str, pathspec.GitIgnoreSpec]]:
    """The .gitignore files between the workspace root and ``start`` (exclusive)."""
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    if start == ws.root or not ws.contains(start):
        return specs
    parts = ws.relative(start).split("/")
    current = ws.root
    for comp in [""] + parts[:-1]:
        current = os.path.join(current, comp) if comp else current
        spec = _load_gitignore(current)
        if spec is not None:
            specs.append((current, spec))
    return specs
