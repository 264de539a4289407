"""JSON-RPC lines on the process's stdio, for the SDK's connection.

The SDK's own line transport logs and drops a line that is not JSON, and a
line that is JSON but not an object stops its receive loop; an editor that
sent either would wait for an answer that never comes.  This transport (the
SDK's ``Transport`` seam: whole messages in and out) answers them as JSON-RPC
says: ``-32700`` for a line that is not JSON, ``-32600`` for one that is not
a request, a notification or a response, or that is longer than
:data:`MAX_LINE_BYTES` (skipped to its end, never held whole), and the
connection goes on.

Every message out passes the event log's redactor first, as every line of
``abhed rpc`` does: events are redacted when recorded, but deltas, diffs and
permission requests are not events.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["MAX_LINE_BYTES", "LineTransport"]

#: A prompt with a pasted file fits; a line past this is refused, not read into memory whole.
MAX_LINE_BYTES = 16 * 1024 * 1024


class _TooLong(Exception):
    pass


class LineTransport:
    """Newline-delimited JSON-RPC from an asyncio reader, to a write function (implements
    ``acp``'s ``Transport``)."""

    def __init__(self, reader: asyncio.StreamReader, write: Callable[[bytes], Awaitable[None]], *,
                 redact: Callable[[Any], Any] | None = None) -> None:
        self._reader = reader
        self._write = write
        self._redact = redact
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionError("the connection to the client is closed")
        if self._redact is not None:
            message = self._redact(message)
        data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
            "utf-8", "replace")
        async with self._lock:  # one message at a time, in order
            await self._write(data)

    async def _error(self, rid: Any, code: int, message: str) -> None:
        try:
            await self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})
        except (ConnectionError, OSError):
            pass

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._line()
            except _TooLong:
                await self._error(None, -32600, f"a message longer than {MAX_LINE_BYTES:,} bytes "
                                  "was skipped; send one JSON-RPC message per line, smaller")
                continue
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                await self._error(None, -32700, f"Parse error: the line is not UTF-8 JSON "
                                  f"({type(exc).__name__}); send one JSON-RPC message per line")
                continue
            problem = _problem(message)
            if problem:
                rid = message.get("id") if isinstance(message, dict) else None
                await self._error(rid if _valid_id(rid) else None, -32600, problem)
                continue
            return message  # type: ignore[no-any-return]

    async def _line(self) -> bytes | None:
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None  # end of input: a last line without its newline
        except asyncio.LimitOverrunError as exc:
            await self._reader.readexactly(exc.consumed)
        while True:  # the rest of the long line, dropped as it comes
            try:
                await self._reader.readuntil(b"\n")
                raise _TooLong
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True


def _valid_id(rid: Any) -> bool:
    return rid is None or (isinstance(rid, (str, int)) and not isinstance(rid, bool))


def _problem(message: Any) -> str:
    """Why ``message`` is not a JSON-RPC request, notification or response ("" if it is one)."""
    if not isinstance(message, dict):
        return "Invalid request: a message must be one JSON object (batches are not supported)"
    if "id" in message and not _valid_id(message["id"]):
        return "Invalid request: \"id\" must be a string, an integer or null"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "Invalid request: \"method\" must be a string"
        if "params" in message and not isinstance(message["params"], (dict, list, type(None))):
            return "Invalid request: \"params\" must be an object"
        return ""
    if "id" in message and ("result" in message or "error" in message):
        return ""
    return "Invalid request: neither a request (\"method\") nor a response (\"id\" with " \
           "\"result\" or \"error\")"
