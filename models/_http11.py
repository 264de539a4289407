"""One HTTP/1.1 exchange per connection, on h11: the model relay's and front's server side.

h11 (httpx's own HTTP/1.1 state machine, maintained by the same people) parses
and frames; this module adds only what a server around it needs: size caps on
the request head and body, a read deadline, a JSON error reply the agent's
provider error path can show (``{"error": {"message", "type", "code"}}``, the
OpenAI shape ``models._openai.server_message`` reads), and a response that is
sent piece by piece as the upstream produces it (SSE passes through unbuffered:
h11 frames it as chunked transfer encoding).  Every exchange ends the
connection (``connection: close``): the agent's client opens one per request
anyway, and one request per connection keeps the caller's identity (peer
credentials, client certificate) bound to exactly one request.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:  # imported where an exchange runs: a tool call loads this module, never a server
    import h11

__all__ = ["Exchange", "HttpRefusal", "Incoming", "ThreadedService"]

_RECV = 64 * 1024


class HttpRefusal(Exception):
    """A request refused before it is forwarded: the status and the message sent back."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Incoming:
    """A whole request: method, target, headers (lower-case names, in order) and body."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The last value of header ``name`` (lower case), or None."""
        found = None
        for k, v in self.headers:
            if k == name:
                found = v
        return found


class Exchange:
    """The server side of one request/response on ``sock`` (already connected, TLS or not)."""

    def __init__(self, sock: socket.socket, *, max_head_bytes: int = 64 * 1024,
                 max_body_bytes: int = 32 * 1024 * 1024, read_timeout_s: float = 30.0) -> None:
        import h11  # heavy third-party: loaded on the first exchange
        self.sock = sock
        self.max_body_bytes = max_body_bytes
        self.read_timeout_s = read_timeout_s
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.status: int | None = None  # the status sent, once sent
        self._whole = False  # the request was read to its end

    def read(self) -> Incoming | None:
        """The request, or None when the peer closed before sending one.

        Raises HttpRefusal for a malformed, oversized or too slow request (the
        caller answers it with :meth:`refuse`)."""
        import h11
        deadline = time.monotonic() + self.read_timeout_s
        req: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise HttpRefusal(exc.error_status_hint, "bad_request",
                                  f"malformed HTTP request: {exc}") from None
            if event is h11.NEED_DATA:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise HttpRefusal(408, "request_timeout", "the request was not received "
                                      f"within {self.read_timeout_s:g} s")
                self.sock.settimeout(remaining)
                try:
                    data = self.sock.recv(_RECV)
                except TimeoutError:
                    raise HttpRefusal(408, "request_timeout", "the request was not received "
                                      f"within {self.read_timeout_s:g} s") from None
                except OSError:
                    return None
                self.conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                req = event
                length = _content_length(event)
                if length is not None and length > self.max_body_bytes:
                    raise HttpRefusal(413, "too_large", f"the request body ({length} bytes) is "
                                      f"over the {self.max_body_bytes}-byte limit; shorten the "
                                      "conversation")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.max_body_bytes:
                    raise HttpRefusal(413, "too_large", "the request body is over the "
                                      f"{self.max_body_bytes}-byte limit; shorten the "
                                      "conversation")
            elif isinstance(event, h11.EndOfMessage):
                assert req is not None
                self._whole = True
                return Incoming(method=req.method.decode("ascii", "replace"),
                                target=req.target.decode("ascii", "replace"),
                                headers=[(k.decode("latin-1").lower(), v.decode("latin-1"))
                                         for k, v in req.headers],
                                body=bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                if req is None:
                    return None
                raise HttpRefusal(400, "bad_request", "the connection closed mid-request")
            else:  # PAUSED cannot come before EndOfMessage
                return None

    def _send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            self.sock.sendall(data)

    def start(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        """Send the response head; the body follows by :meth:`send` and :meth:`end`."""
        import h11
        self.status = status
        hs = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP]
        hs.append(("connection", "close"))
        self.sock.settimeout(None)
        self._send(h11.Response(status_code=status, headers=hs))

    def send(self, data: bytes) -> None:
        import h11
        if data:
            self._send(h11.Data(data=data))

    def end(self) -> None:
        import h11
        self._send(h11.EndOfMessage())

    def reply_json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.start(status, [("content-type", "application/json"),
                            ("content-length", str(len(data)))])
        self.send(data)
        self.end()

    def refuse(self, refusal: HttpRefusal) -> None:
        """Answer a refusal as an OpenAI-shaped JSON error, if a head was not sent already."""
        import h11
        if self.conn.our_state is not h11.IDLE and self.conn.our_state is not h11.SEND_RESPONSE:
            return
        try:
            self.reply_json(refusal.status, error_body(refusal.code, refusal.message))
        except (OSError, h11.LocalProtocolError):
            return
        if not self._whole:
            self._drain()

    def _drain(self) -> None:
        """Read what the peer is still sending (up to 4 MiB, until it pauses): closing over
        unread bytes makes TCP send a reset, which can destroy the refusal in flight."""
        self.sock.settimeout(0.2)
        left = 4 << 20
        try:
            while left > 0:
                data = self.sock.recv(min(_RECV, left))
                if not data:
                    return
                left -= len(data)
        except OSError:
            return


def error_body(code: str, message: str) -> dict[str, object]:
    """The OpenAI error shape, which the agent's client quotes to the engineer."""
    return {"error": {"message": message, "type": "abhed_model_service", "code": code}}


def _content_length(req: h11.Request) -> int | None:
    for k, v in req.headers:
        if k.lower() == b"content-length":
            try:
                return int(v)
            except ValueError:
                return None
    return None


# Framing is h11's: a relayed response's own framing headers must not be copied.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer",
                         "upgrade", "proxy-authenticate", "proxy-connection"})


class ThreadedService:
    """The lifecycle the relay, the front and the scripted model server share: serve on a
    thread, stop in order.

    Subclasses set ``_server`` (a threading socketserver) and ``_thread_name``, ``_http``
    (their upstream client, closed once the server has stopped) where they relay, and
    ``_poll_s``/``_join_s`` where they stop faster; they may override :meth:`_stopping`,
    which runs first (the scripted server ends its streams there), and :meth:`_closed`,
    which runs once the server and its threads have stopped (the relay removes its socket
    there, the front closes a record it opened itself).
    """

    _server: socketserver.BaseServer
    _http: Any = None
    _thread_name = "service"
    _thread: threading.Thread | None = None
    _poll_s = 0.2  # how soon shutdown is noticed
    _join_s = 10.0  # how long the serving thread may take to end

    def serve_forever(self) -> None:
        self._server.serve_forever(poll_interval=self._poll_s)

    def start(self) -> Self:
        self._thread = threading.Thread(target=self.serve_forever, name=self._thread_name,
                                        daemon=True)
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._stopping()
        self._server.shutdown()
        self._server.server_close()
        if self._http is not None:
            self._http.close()
        if self._thread is not None:
            self._thread.join(self._join_s)
        self._closed()

    def _stopping(self) -> None:
        """What a subclass signals before the server stops."""

    def _closed(self) -> None:
        """What a subclass releases after it has stopped."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
