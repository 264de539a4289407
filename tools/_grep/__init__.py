"""grep's machinery: RE2 syntax checks, two engines behind one interface, output shaping.

Engines (see :func:`select_engine`): ripgrep when an ``rg`` binary is found
(:mod:`tools._grep._ripgrep` says where it looks), the pure-Python RE2 engine
otherwise; the operator's ``grep_engine`` setting forces either.  Both are
given the same candidate list and the same compiled :class:`Query`, and the
tests hold them to identical results.

Errors: everything the model can cause is a :class:`tools.ToolFailure`
(codes ``unsupported_regex``, ``invalid_regex``, ``pattern_too_large``,
``newline_in_pattern``, ``invalid_pattern``, ``invalid_glob``,
``engine_unavailable``).
"""

from __future__ import annotations

from foundation import usable_cpus
from tools._grep._candidates import Candidates, collect
from tools._grep._engine import BINARY_SNIFF_BYTES, Engine, MatchLine, ScanResult
from tools._grep._pyengine import PythonEngine
from tools._grep._query import Query, compile_query
from tools._grep._ripgrep import RipgrepEngine, find_rg
from tools._grep._shape import (
    MAX_FILES,
    MAX_LINE_CHARS,
    MAX_LINES_PER_FILE,
    MAX_MATCH_LINES,
    content_block,
    no_matches,
)
from tools._result import ToolFailure

__all__ = [
    "BINARY_SNIFF_BYTES",
    "Candidates",
    "Engine",
    "MAX_FILES",
    "MAX_LINES_PER_FILE",
    "MAX_LINE_CHARS",
    "MAX_MATCH_LINES",
    "MatchLine",
    "PythonEngine",
    "Query",
    "RipgrepEngine",
    "ScanResult",
    "collect",
    "compile_query",
    "content_block",
    "default_threads",
    "find_rg",
    "no_matches",
    "select_engine",
]


def default_threads() -> int:
    """Threads for rg and worker processes for the Python engine: the same number."""
    return min(usable_cpus(), 8)


def select_engine(choice: str, root: str, threads: int | None = None) -> Engine:
    """The engine for ``choice`` ('auto', 'ripgrep' or 'python')."""
    n = default_threads() if threads is None else threads
    if choice == "python":
        return PythonEngine(1, readahead=True)
    rg = find_rg()
    if rg is not None:
        return RipgrepEngine(rg, root, n)
    if choice == "ripgrep":
        raise ToolFailure(
            "engine_unavailable",
            "The operator set grep_engine to 'ripgrep' but no usable rg binary (ripgrep 13 or "
            "newer) was found beside the Python interpreter or on PATH. Ask the operator to "
            "install the ripgrep wheel or set grep_engine to 'auto'.",
        )
    return PythonEngine(1, readahead=True)
