"""One GET to a model server on this host, for health checks: loopback TCP or a Unix socket.

A leaf: the launcher (``models._serve``), the host check (``models._host_check``) and the
on-demand service (``models._local_service``) all use it, and the host check imported it
from the launcher inside a function, a runtime import cycle (_serve -> _catalog ->
_host_check -> _serve).
"""

from __future__ import annotations

import socket
from pathlib import Path

__all__ = ["get_local"]


def _get_unix(sock_path: Path, url: str, timeout_s: float,
              headers: dict[str, str] | None) -> tuple[int, bytes]:
    """GET ``url``'s path over the Unix socket ``sock_path`` (http.client, as urllib cannot)."""
    import http.client
    from urllib.parse import urlsplit

    class _Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout_s)
            try:
                s.connect(str(sock_path))
            except OSError:
                s.close()
                raise
            self.sock = s

    conn = _Conn("localhost", timeout=timeout_s)
    try:
        conn.request("GET", urlsplit(url).path or "/", headers=headers or {})
        resp = conn.getresponse()
        return int(resp.status), bytes(resp.read(1 << 20))
    finally:
        conn.close()


def get_local(url: str, timeout_s: float, headers: dict[str, str] | None = None,
              unix_socket: Path | None = None) -> tuple[int, bytes]:
    """One GET for a health check: over ``unix_socket`` when given, else loopback TCP.

    Raises OSError when nothing answers; an HTTP error status is returned, not raised.
    """
    if unix_socket is not None:
        return _get_unix(unix_socket, url, timeout_s, headers)
    return _get(url, timeout_s, headers)


def _get(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    # urllib, not httpx: the launcher must work before anything else is imported,
    # and a no-proxy opener keeps environment proxies out of health checks.  Imported
    # here: every `abhed` verb that reads the config imports this module (ServeSettings).
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}),
                         timeout=timeout_s) as resp:
            return int(resp.status), bytes(resp.read(1 << 20))
    except urllib.error.HTTPError as exc:
        return int(exc.code), b""
