"""The one shell parser: a command line as every simple command it would run, and how.

Used by policy (approval per command, destructive patterns, code it cannot
judge) and by the bash tool (commands that need a terminal), so both read a
command the same way: ``watch ls`` is the wrapper ``watch`` running ``ls``
for both.

Policy judges bash per command, not per call: ``npm test && rm -rf /`` is two
commands, and the second must be allowed on its own.  Beyond the commands
written at the top level, the parser follows every route by which a command
line runs further code (see docs/policy.md, "Routes to code"): shells given a
script (``bash -lc '...'``, in any option spelling), ``eval``, here-documents
and here-strings fed to a shell, wrappers (``sudo``, ``env -S``, ``xargs``,
``timeout``, ...), programs that run commands (``find -exec``, sed's ``e``,
awk's ``system``, ``rg --pre``, git settings and aliases, ...), and variables
that programs run (``GIT_PAGER``).  Shell text found on a route is read with
the same rules, to :data:`MAX_DEPTH` levels; code in another language is
reported as :class:`OpaqueCode`.

This is a deliberately small, conservative reader of shell syntax, not a
shell: whatever it cannot read with certainty is reported as *unparseable*,
and policy asks about it instead of guessing.
"""

from __future__ import annotations

from tools.shell_parser._model import (
    MAX_CHARS,
    MAX_COMMANDS,
    MAX_DEPTH,
    OpaqueCode,
    Parsed,
    SimpleCommand,
)
from tools.shell_parser._options import abbreviates
from tools.shell_parser._split import split_command

__all__ = ["MAX_CHARS", "MAX_COMMANDS", "MAX_DEPTH", "OpaqueCode", "Parsed", "SimpleCommand",
           "abbreviates", "split_command"]
