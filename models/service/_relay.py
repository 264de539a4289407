"""``abhed model-relay``: the one way an engineer on a host reaches the model service.

A root-run process listens on a Unix socket every local user may connect to
(``/run/abhed/model.sock``).  For each connection it learns the caller from the
kernel (``SO_PEERCRED``: the uid of the process that connected, which the
caller cannot forge), turns the uid into a user name, refuses a user the
operator has not enrolled on this host or has revoked (``models.service._enrolment``),
drops every attribution header the caller sent, adds ``X-Abhed-Engineer: USER``
and forwards the OpenAI-compatible request to the model service over TLS with
this host's credential (``models._site_tls``), which only root can read.  The
answer comes back as it is produced: a streamed reply passes through chunk by
chunk.  So no engineer holds a secret, none can speak as another, and every
request the service answers is attributed to a host and a Unix user.

The installer's health gate on an engineer's host starts the new release's relay
with ``--gate`` on a socket of its own: that relay admits only its own uid (root,
the gate's probe) and names it ``GATE_ENGINEER``, a name no engineer can be given,
so the gate takes the engineers' path and the front's record shows it as the gate.

One request per connection (``models._http11``): the peer credential names the
process that opened this very connection.  A refusal is an OpenAI-shaped JSON
error the agent shows as it is.
"""

from __future__ import annotations

import os
import pwd
import socket
import socketserver
import ssl
import struct
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from models._http11 import Exchange, HttpRefusal, Incoming, ThreadedService
from models._site_tls import ATTRIBUTION_HEADERS, ENGINEER_HEADER, GATE_ENGINEER, client_context
from models.service._enrolment import Enrolment

if TYPE_CHECKING:
    import httpx

__all__ = ["ModelRelay", "RelaySettings", "forwardable_headers", "peer_uid"]

# Never copied from the caller: framing (h11's and httpx's own), the upstream's key,
# encodings we do not want (the relay passes bytes through untouched), and proxies'.
_DROP = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding",
                   "te", "trailer", "upgrade", "authorization", "proxy-authorization",
                   "proxy-connection", "accept-encoding", "forwarded", "x-forwarded-for",
                   "x-forwarded-host", "x-forwarded-proto", "x-real-ip"}) | ATTRIBUTION_HEADERS


def forwardable_headers(incoming: Incoming, engineer: str) -> list[tuple[str, str]]:
    """The caller's headers minus anything that frames, authenticates or attributes, plus the
    engineer the kernel named: a caller's own ``X-Abhed-Engineer`` never gets through."""
    kept = [(k, v) for k, v in incoming.headers
            if k not in _DROP and not k.startswith("x-abhed-engineer")]
    return [*kept, (ENGINEER_HEADER, engineer), ("accept-encoding", "identity")]


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, from the kernel."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


@dataclass(frozen=True)
class RelaySettings:
    """Where the relay listens, whom it admits, and where it forwards."""

    socket_path: Path
    upstreams: Sequence[str]  # https://model-host:8443 (several: tried in turn on connect errors)
    ca: Path
    credential: Path
    enrolment: Path | None  # None only for the gate's relay, which admits no engineer
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    max_body_bytes: int = 32 * 1024 * 1024
    max_connections: int = 256
    socket_mode: int = 0o666
    gate: bool = False  # admit only this process's own uid, named GATE_ENGINEER (module doc)


def _log(line: str) -> None:
    sys.stderr.write(f"abhed model-relay: {line}\n")
    sys.stderr.flush()


class ModelRelay(ThreadedService):
    """The relay server; ``serve_forever`` until ``shutdown``; usable as a context manager."""

    def __init__(self, settings: RelaySettings,
                 *, transport: httpx.BaseTransport | None = None) -> None:
        import httpx

        self.settings = settings
        if (settings.enrolment is None) != settings.gate:
            raise ValueError("the relay needs the enrolled engineers' list (--engineers), "
                             "except the installer gate's (--gate), which takes none")
        self.enrolment = Enrolment(settings.enrolment) if settings.enrolment else None
        tls: ssl.SSLContext = client_context(settings.ca, settings.credential)
        self.upstreams = [u.rstrip("/") for u in settings.upstreams]
        if not self.upstreams:
            raise ValueError("the relay needs at least one upstream")
        self._http = httpx.Client(verify=tls, trust_env=False, follow_redirects=False,
                                  transport=transport,
                                  limits=httpx.Limits(max_keepalive_connections=0))
        self._slots = threading.BoundedSemaphore(settings.max_connections)
        relay = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                relay.handle(self.request)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            # Shutting down waits for the requests in flight (each bounded by its timeouts),
            # so an answer being streamed is finished and recorded, not cut.
            daemon_threads = False
            block_on_close = True

        path = settings.socket_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        self._server = Server(str(path), Handler)
        path.chmod(settings.socket_mode)  # world-connectable: the enrolment decides
        self._thread_name = "model-relay"

    # -- one connection ----------------------------------------------------------------
    def handle(self, sock: socket.socket) -> None:
        ex = Exchange(sock, max_body_bytes=self.settings.max_body_bytes)
        if not self._slots.acquire(blocking=False):
            ex.refuse(HttpRefusal(503, "busy", "the model relay is at its connection limit; "
                                  "retry in a moment"))
            return
        try:
            try:
                uid = peer_uid(sock)  # before anything is read: who opened this connection
                # Read next: a refusal sent over an unread request can be lost to a reset.
                incoming = ex.read()
                if incoming is None:
                    return
                user = self._admit(uid)
                if not incoming.target.startswith("/v1/") or ".." in incoming.target:
                    raise HttpRefusal(404, "not_found", f"the model relay forwards /v1/ "
                                      f"requests only, not {incoming.target[:200]!r}")
                self._forward(ex, incoming, user)
            except HttpRefusal as refusal:
                ex.refuse(refusal)
        finally:
            self._slots.release()

    def _admit(self, uid: int) -> str:
        """The engineer this uid is, as the front will record it; HttpRefusal if none."""
        if self.enrolment is None:  # the gate's relay: its own uid, and no one else
            if uid != os.geteuid():
                raise HttpRefusal(403, "not_gate", "this relay serves the installer's health "
                                  "gate only; use the host's relay")
            return GATE_ENGINEER
        user = _user_name(uid)
        why = self.enrolment.check(user, uid)
        if why is not None:
            _log(f"refused uid {uid} ({user}): {why}")
            raise HttpRefusal(403, "not_enrolled", why)
        return user

    def _forward(self, ex: Exchange, incoming: Incoming, user: str) -> None:
        import httpx

        headers = forwardable_headers(incoming, user)
        timeout = httpx.Timeout(connect=self.settings.connect_timeout_s,
                                read=self.settings.read_timeout_s, write=60.0, pool=10.0)
        last = ""
        for base in self.upstreams:
            req = self._http.build_request(incoming.method, base + incoming.target,
                                           content=incoming.body, headers=headers,
                                           timeout=timeout)
            try:
                resp = self._http.send(req, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last = f"{base}: {_tls_reason(exc)}"
                continue
            except httpx.HTTPError as exc:
                raise HttpRefusal(502, "upstream_failed", f"the model service at {base} did not "
                                  f"answer: {_tls_reason(exc)}; if that names a certificate, "
                                  "ask the operator for this host's credential") from None
            try:
                ex.start(resp.status_code, [(k, v) for k, v in resp.headers.items()
                                            if k.lower() != "content-encoding"])
                for chunk in resp.iter_raw():
                    ex.send(chunk)
                ex.end()
            except httpx.HTTPError as exc:
                _log(f"{user}: the stream from {base} broke ({type(exc).__name__}: {exc})")
            except OSError:
                pass  # the caller went away; closing the upstream tells the front
            finally:
                resp.close()
            return
        _log(f"{user}: no model service answered ({last})")
        raise HttpRefusal(502, "upstream_unreachable", f"no model service answered the relay "
                          f"({last}); if the reason names the certificate, ask the operator to "
                          "issue this host a new credential")

    def _closed(self) -> None:
        self.settings.socket_path.unlink(missing_ok=True)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        raise HttpRefusal(403, "no_user_name", f"uid {uid} has no user name on this host; only "
                          "enrolled engineers may use the model service") from None


def _tls_reason(exc: Exception) -> str:
    """The certificate verdict inside an httpx connect error, in the words OpenSSL used."""
    text = str(exc)
    for needle, said in (("certificate revoked", "this host's credential was revoked"),
                         ("certificate expired", "a certificate has expired"),
                         ("unknown ca", "the model service does not trust the CA that "
                          "issued this host's credential (another site's?)"),
                         ("certificate verify failed", "the model service's certificate is "
                          "not from this site's CA or does not name the host asked for"),
                         ("bad certificate", "the model service refused this host's "
                          "certificate")):
        if needle in text.lower():
            return f"{said} ({text})"
    return f"{type(exc).__name__}: {text}"
