"""The files a search looks at: walked once, filtered, sorted.

Both engines get this exact list, so ignore rules, the ``glob`` filter, the
secret-path policy and the order can never differ between them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tools._paths import Workspace
from tools._result import ToolFailure
from tools._settings import ToolSettings
from tools._walk import walk_files
from tools.pathpattern import PathPattern, PatternError

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
    """The ``glob`` filter in the one path-pattern dialect (tools.pathpattern): ``*.py``
    matches names at any depth, a glob with '/' is anchored at the searched directory, a
    leading ``!`` inverts."""
    if glob is None:
        return None
    text = glob.strip()
    if not text or "\x00" in text:
        raise ToolFailure("invalid_glob", f"glob {glob!r} is empty or holds a NUL byte. Give a "
                          "file pattern such as '*.py' or 'src/**/*.ts', or leave glob out.")
    if ".." in text.lstrip("!").split("/"):
        raise ToolFailure("invalid_glob", f"glob {glob!r} contains '..'; it filters files beneath "
                          "path only. Set path to the directory you want instead.")
    try:
        return PathPattern(text).match
    except PatternError as exc:
        raise ToolFailure("invalid_glob", f"glob {exc.message[len('Pattern '):]} Give a file "
                          "pattern such as '*.py' or 'src/**/*.ts', or leave glob out.") from None


def _secret_filter(ws: Workspace) -> Callable[[str], bool]:
    return lambda path: ws.secret_reason(path) is not None
