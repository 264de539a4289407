"""``abhed rpc``: the line-delimited JSON protocol for driving Abhed from another language.

Public surface: :class:`RpcServer` and :data:`MAX_LINE_BYTES`.  Malformed
requests get an error line, never an exception; see docs/rpc.md.
"""

from __future__ import annotations

from appliance.rpc._server import MAX_LINE_BYTES, RpcServer

__all__ = ["MAX_LINE_BYTES", "RpcServer"]
