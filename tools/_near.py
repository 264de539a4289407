"""Suggestions for a path that does not exist: near names, same name elsewhere."""

from __future__ import annotations

import os
from itertools import islice

from tools._paths import Located
from tools._result import ToolFailure
from tools._tool import ToolContext
from tools._walk import walk_files

__all__ = ["missing_file_failure"]

_MAX_WALK = 20000


def near_names(ctx: ToolContext, loc: Located, limit: int = 3) -> list[str]:
    """Up to ``limit`` existing paths that look like the missing one."""
    parent = os.path.dirname(loc.path)
    found: list[str] = []
    try:
        siblings = [e.name for e in os.scandir(loc.dir_fd)]
    except OSError:
        siblings = []
    from rapidfuzz import fuzz, process  # lazily: only a failed match pays its import

    for name, _score, _ in process.extract(loc.name, siblings, scorer=fuzz.ratio, limit=limit,
                                           score_cutoff=60):
        found.append(os.path.join(parent, name))
    if len(found) < limit:
        for entry in islice(walk_files(ctx.workspace, ctx.workspace.root, ctx.settings), _MAX_WALK):
            if os.path.basename(entry.path) == loc.name and entry.path not in found:
                found.append(entry.path)
                if len(found) >= limit:
                    break
    return [p for p in found if ctx.workspace.secret_reason(p) is None]


def missing_file_failure(ctx: ToolContext, user_path: str, loc: Located) -> ToolFailure:
    suggestions = near_names(ctx, loc)
    hint = ""
    if suggestions:
        hint = " Did you mean " + " or ".join(suggestions) + "?"
    parent = os.path.dirname(loc.path)
    return ToolFailure(
        "not_found",
        f"File not found: {loc.path}.{hint} Use glob (e.g. pattern '**/{loc.name}' or path "
        f"{parent!r}) to see what exists.",
        details={"suggestions": suggestions},
    )
