"""The files a search looks at: walked once, filtered, sorted.

Both engines get this exact list, so ignore rules, the ``glob`` filter, the
secret-path policy and the order can never differ between them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from tools._paths import Workspace
from tools._result import ToolFailure
from tools._settings import ToolSettings
from tools._walk import walk_files
from tools.glob import compile_glob

__all__ = ["Candidates", "collect"]


@dataclass
class Candidates:
    files: list[str]  # absolute, sorted
    secret_skipped: int
    base: str


def collect(ws: Workspace, base: str, is_dir: bool, glob: str | None,
            settings: ToolSettings) -> Candidates:
    """Candidates beneath ``base`` (a resolved absolute path inside the workspace)."""
    if not is_dir:
        if ws.secret_reason(base) is not None:
            ws.refuse_secret(base, action="search")
        return Candidates([base], 0, base)
    keep = _glob_filter(glob)
    secret = _secret_filter(ws)
    files: list[str] = []
    skipped = 0
    for entry in walk_files(ws, base, settings):
        if keep is not None and not keep(entry.rel):
            continue
        if secret(entry.path):
            skipped += 1
            continue
        files.append(entry.path)
    files.sort()
    return Candidates(files, skipped, base)


def _glob_filter(glob: str | None) -> Callable[[str], bool] | None:
    """``*.py`` matches the file name at any depth; a glob with '/' matches the path
    relative to the searched directory; a leading ``!`` inverts."""
    if glob is None:
        return None
    text = glob.strip()
    if not text or "\x00" in text:
        raise ToolFailure("invalid_glob", f"glob {glob!r} is empty or holds a NUL byte. Give a "
                          "file pattern such as '*.py' or 'src/**/*.ts', or leave glob out.")
    negate = text.startswith("!")
    if negate:
        text = text[1:]
    text = text.lstrip("/")
    if ".." in text.split("/"):
        raise ToolFailure("invalid_glob", f"glob {glob!r} contains '..'; it filters files beneath "
                          "path only. Set path to the directory you want instead.")
    regex = compile_glob(text)
    by_name = "/" not in text

    def keep(rel: str) -> bool:
        subject = rel.rsplit("/", 1)[-1] if by_name else rel
        return (regex.fullmatch(subject) is not None) != negate

    return keep


def _secret_filter(ws: Workspace) -> Callable[[str], bool]:
    """A fast equivalent of ``ws.secret_reason(path) is not None``.

    The matcher tries every rule with ``fnmatch`` per file, which costs
    seconds on a 100,000-file tree.  One combined regex that matches whenever
    *any* positive rule could match (a superset) lets almost every path
    through at once; only its hits go to the exact matcher.
    """
    rules = getattr(ws.secrets, "_rules", None)
    if not isinstance(rules, list):
        return lambda path: ws.secret_reason(path) is not None
    alternatives: list[str] = []
    for negate, kind, pat in rules:
        if negate:
            continue
        body = fnmatch.translate(pat)  # '*' may cross '/': a superset, checked exactly below
        body = body[body.index(":") + 1 : body.rindex(")")] if body.startswith("(?s:") else body
        tail = "/" if kind == "dir" else r"\Z"
        alternatives.append(f"(?:^|/)(?:{body}){tail}")
    if not alternatives:
        return lambda path: False
    maybe = re.compile("|".join(alternatives), re.DOTALL)
    root_len = len(ws.root.rstrip("/")) + 1

    def is_secret(path: str) -> bool:
        if maybe.search(path[root_len:]) is None:
            return False
        return ws.secret_reason(path) is not None

    return is_secret
