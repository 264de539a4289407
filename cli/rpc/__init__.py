"""``abhed rpc``: the line-delimited JSON protocol for driving Abhed from another language.

Public surface: :class:`RpcServer`, :data:`MAX_LINE_BYTES` and the ``rpc`` command
itself (the verb lives beside its server, since ``cli.rpc`` is this package).  Malformed
requests get an error line, never an exception; see docs/rpc.md.
"""

from __future__ import annotations

from cli.rpc._server import MAX_LINE_BYTES, RpcServer
from cli.rpc._verb import rpc

__all__ = ["MAX_LINE_BYTES", "RpcServer", "rpc"]
