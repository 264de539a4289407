"""Listing the files glob and grep consider, with git's ignore rules.

Inside a git work tree the list comes from git itself
(``git ls-files --cached --others --exclude-standard``), so it agrees with
``git check-ignore`` by construction: nested ``.gitignore`` files, negation,
``.git/info/exclude`` and tracked-but-ignored files all behave as git says.
Elsewhere a ``scandir`` walker applies the ``.gitignore`` files it meets with
git's rules, so a copied tree without ``.git`` gives the same answer.

``.ignore`` and ``.rgignore`` files are honoured in both cases, with
ripgrep's precedence (a decision in ``.rgignore`` beats ``.ignore``'s, which
beats ``.gitignore``'s; within a kind the deepest file wins).  Inside a work
tree they only take files away from git's list: a negation there does not
bring back a file git ignores (docs/grep.md).  Every ignore file is read
with :func:`tools.pathpattern.gitignore_spec`, the one matcher the
operator's patterns use too.

On top of either come the operator's ignore list and the default excluded
directory names.  Hidden files are included (``.github/``, ``.env.example`` are
often exactly what an agent needs); secret paths are filtered by the caller.
Symlinks are never followed and never listed: a link can point anywhere, and
ripgrep without ``-L`` does the same.

What keeps the walker fast (issue 16; figures in docs/performance.md):

* file types come from ``scandir``'s ``d_type``, so a file costs no ``stat``
  until a caller asks for :attr:`WalkEntry.st` (glob does, for mtimes; grep
  does not);
* each ``.gitignore`` is compiled once into one combined regular expression
  that says whether *any* of its patterns could match; only paths it hits
  (a few per cent) go to pathspec's exact last-match-wins check;
* compiled ignore files are cached across calls, keyed by the file's inode,
  size and change time, so an agent grepping the same tree again does not
  recompile hundreds of them.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from foundation import is_within
from tools._paths import Workspace
from tools._settings import ToolSettings
from tools.pathpattern import PathRules, gitignore_spec

if TYPE_CHECKING:
    import pathspec

__all__ = ["WalkEntry", "walk_files"]

_ALWAYS = object()  # stands for a combined program RE2 refused: every path is checked exactly
_DIR_MARK_GROUP = "(?P<ps_d>"  # pathspec's only named group; duplicates cannot be combined
_CACHE_ENTRIES = 4096


class WalkEntry:
    """One listed file: absolute ``path``, ``rel`` to the walked directory, and its ``st``.

    ``st`` (the ``lstat`` result) is fetched on first use: grep never needs it.
    """

    __slots__ = ("_st", "path", "rel")

    def __init__(self, path: str, rel: str, st: os.stat_result | None = None) -> None:
        self.path = path
        self.rel = rel
        self._st = st

    @property
    def st(self) -> os.stat_result:
        if self._st is None:
            self._st = os.lstat(self.path)
        return self._st

    def __repr__(self) -> str:
        return f"WalkEntry({self.path!r}, {self.rel!r})"


class _Ignore:
    """One ignore file's patterns: a fast "could any match?" test before the exact one.

    The test is one RE2 program for the whole file (a DFA: linear in the path,
    whatever the number of patterns).  Python's ``re`` was tried first and was
    slower than pathspec itself: each ``(?:.+/)?`` alternative backtracks.
    """

    __slots__ = ("anchor", "maybe", "spec")

    def __init__(self, spec: pathspec.GitIgnoreSpec) -> None:
        self.spec = spec
        self.anchor: Any = None
        parts = []
        for pattern in spec.patterns:
            regex = getattr(pattern, "regex", None)
            if getattr(pattern, "include", None) is None or regex is None:
                continue  # comments, blank lines: never decide anything
            parts.append("(?:" + regex.pattern.replace(_DIR_MARK_GROUP, "(?:") + ")")
        self.maybe: Any = None  # re2._re2.RE2, or None when no pattern can decide
        if parts:
            from re2 import _re2

            options = _re2.RE2.Options()
            options.never_capture = True
            options.log_errors = False
            options.max_mem = 64 << 20
            program = _re2.RE2("|".join(parts).encode("utf-8", "surrogateescape"), options)
            self.maybe = program if program.ok() else _ALWAYS
            self.anchor = _re2.RE2.Anchor.UNANCHORED

    def verdict(self, rel: str) -> bool | None:
        """True ignored, False re-included by a negation, None no pattern matched."""
        maybe = self.maybe
        if maybe is None:
            return None
        if maybe is not _ALWAYS:
            data = rel.encode("utf-8", "surrogateescape")
            if maybe.Match(self.anchor, data, 0, len(data))[0][0] < 0:
                return None
        include: bool | None = self.spec.check_file(rel).include
        return include


class _IgnoreCache:
    """Compiled ignore files by (path, inode, size, change time), least recently used out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, int, int, int, int], _Ignore | None] = OrderedDict()

    def load(self, directory: str, name: str = ".gitignore") -> _Ignore | None:
        path = directory.rstrip("/") + "/" + name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            key = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    return self._items[key]
            with os.fdopen(os.dup(fd), encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            return None
        finally:
            os.close(fd)
        ignore = _compile(lines)
        with self._lock:
            self._items[key] = ignore
            while len(self._items) > _CACHE_ENTRIES:
                self._items.popitem(last=False)
        return ignore


def _compile(lines: list[str]) -> _Ignore | None:
    """Compile ignore lines; a line pathspec refuses (``!`` alone, a trailing backslash) is
    skipped, as git skips it, instead of failing the whole walk."""

    if not lines:
        return None
    try:
        spec = _spec(lines)
    except ValueError:
        spec = _spec([line for line in lines if _valid(line)])
    return _Ignore(spec)


def _spec(lines: list[str]) -> pathspec.GitIgnoreSpec:
    import re2

    try:
        return gitignore_spec(lines)
    except re2.error:  # pathspec's RE2 set outgrew its memory (tens of thousands of lines)
        return gitignore_spec(lines, backend="simple")


def _valid(line: str) -> bool:
    try:
        _spec([line])
    except ValueError:
        return False
    return True


_IGNORES = _IgnoreCache()


class _Filters:
    def __init__(self, ws: Workspace, settings: ToolSettings) -> None:
        self.ws = ws
        self.excluded_names = frozenset(settings.default_excludes)
        # The operator's list is in the one path-pattern dialect (tools.pathpattern:
        # gitignore's rules plus braces); .gitignore files keep git's own.
        self.operator = PathRules(settings.ignore) if settings.ignore else None

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
        return self.operator.match(rel, is_dir=is_dir) is not None


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
        if top and top != root and is_within(root, top):
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
    """git's list, minus what the operator, the default excludes, ``.ignore`` and ``.rgignore``
    leave out.  (git already applied ``.gitignore``; a negation in ``.ignore`` cannot bring
    back a file git ignores here, see docs/grep.md.)"""
    dirs: dict[str, tuple[bool, _Specs]] = {}
    top = _specs_for_ancestors(start, filters.ws, _RG_KINDS)

    def state(directory: str) -> tuple[bool, _Specs]:
        """(excluded, ignore files in force inside) for a directory at or under ``start``."""
        known = dirs.get(directory)
        if known is not None:
            return known
        if directory == start:
            result = (False, top + _own(directory, _RG_KINDS))
        else:
            parent_excluded, specs = state(os.path.dirname(directory))
            if parent_excluded or filters.dir_excluded(os.path.basename(directory), directory) \
                    or (specs and _ignored(specs, directory + "/")):
                result = (True, ())
            else:
                result = (False, specs + _own(directory, _RG_KINDS))
        dirs[directory] = result
        return result

    for rel in listed:
        path = os.path.join(start, rel)
        excluded, specs = state(os.path.dirname(path))
        if excluded or (specs and _ignored(specs, path)) or filters.file_excluded(path):
            continue
        try:
            st = os.lstat(path)  # also drops tracked files deleted from the work tree
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            yield WalkEntry(path, rel, st)


# Each ignore file in force: its kind (an index into _KINDS: precedence), the length of
# its base directory's path plus the slash (so a walked path's part relative to it is a
# slice), and its compiled patterns.
_Specs = tuple[tuple[int, int, _Ignore], ...]
# ripgrep's precedence: a decision in .rgignore beats one in .ignore, which beats
# .gitignore's; within one kind the deepest deciding file wins (docs/grep.md).
_KINDS = (".rgignore", ".ignore", ".gitignore")
_ALL_KINDS = (0, 1, 2)
_RG_KINDS = (0, 1)  # inside a git work tree git has applied .gitignore already


def _own(directory: str, kinds: tuple[int, ...], names: frozenset[str] | None = None) -> _Specs:
    """The ignore files ``directory`` itself holds (``names``: its entries, when listed)."""
    base = len(directory.rstrip("/")) + 1
    found = []
    for kind in kinds:
        if names is not None and _KINDS[kind] not in names:
            continue
        ignore = _IGNORES.load(directory, _KINDS[kind])
        if ignore is not None:
            found.append((kind, base, ignore))
    return tuple(found)


def _scan(start: str, filters: _Filters) -> Iterator[WalkEntry]:
    excluded = filters.excluded_names
    operator = filters.operator is not None
    stack: list[tuple[str, str, _Specs]] = [(start, "", _specs_for_ancestors(start, filters.ws,
                                                                           _ALL_KINDS))]
    while stack:
        directory, rel_dir, specs = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError:
            continue
        names = frozenset(e.name for e in entries if e.name in _KINDS)
        if names:
            specs = specs + _own(directory, _ALL_KINDS, names)
        prefix = rel_dir + "/" if rel_dir else ""
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                path = entry.path
                if name in excluded or (operator and filters.dir_excluded(name, path)):
                    continue
                if specs and _ignored(specs, path + "/"):
                    continue
                stack.append((path, prefix + name, specs))
            elif is_file:
                path = entry.path
                if specs and _ignored(specs, path):
                    continue
                if operator and filters.file_excluded(path):
                    continue
                yield WalkEntry(path, prefix + name)


def _ignored(specs: _Specs, path: str) -> bool:
    """The verdict for ``path`` (a directory's ends in '/'), ripgrep's way: the kind of file
    with the highest precedence that decides wins, and within it the deepest file."""
    verdicts: list[bool | None] = [None, None, None]
    for kind, base_len, ignore in specs:
        # Every walked path lies beneath each spec's base (an ancestor), so a
        # slice gives the relative path; os.path.relpath cost more than the match.
        result = ignore.verdict(path[base_len:])
        if result is not None:
            verdicts[kind] = result
    for verdict in verdicts:
        if verdict is not None:
            return verdict
    return False


def _specs_for_ancestors(start: str, ws: Workspace, kinds: tuple[int, ...]) -> _Specs:
    """The ignore files between the workspace root and ``start`` (exclusive)."""
    specs: list[tuple[int, int, _Ignore]] = []
    if start == ws.root or not ws.contains(start):
        return ()
    parts = ws.relative(start).split("/")
    current = ws.root
    for comp in [""] + parts[:-1]:
        current = os.path.join(current, comp) if comp else current
        specs.extend(_own(current, kinds))
    return tuple(specs)
