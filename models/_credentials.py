"""Site credentials for a model server: an API key and the site's own CA.

The key is never in a config file, an argument list or the event log: the
config names *where* it is (``api_key_file`` or ``api_key_env``) and it is read
only when a client or vLLM is started.  vLLM gets it through ``VLLM_API_KEY``,
not ``--api-key``, because a process's arguments are readable by every user
(``ps``).  The value is kept in :class:`ApiKey`, whose ``repr`` and ``str`` are
masked, so it cannot leak through a log line or a traceback's locals.

A ``ca_bundle`` is a PEM file of the CA certificates that sign the site's
``https`` model servers; only those are trusted for that provider.  Without
one, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` are honoured (the client otherwise
ignores the environment, so proxies cannot reroute it), else the public roots.
"""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path

from models._errors import ProviderConfigError

__all__ = ["ApiKey", "read_api_key", "tls_context"]

_MAX_KEY_BYTES = 4096
_MAX_CA_BYTES = 4 * 1024 * 1024


class ApiKey:
    """An API key whose text shows only in the ``Authorization`` header it builds."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def header(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._value}"}

    def reveal(self) -> str:
        """The key itself, for the one place that must pass it on (vLLM's environment)."""
        return self._value

    def __repr__(self) -> str:
        return "ApiKey(***)"

    __str__ = __repr__


def _read_small_file(path: Path, cap: int, what: str) -> bytes:
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC  # a FIFO must not hang us
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ProviderConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ProviderConfigError(f"{what} {path} is not a regular file")
        data = b""
        while len(data) <= cap:
            try:
                chunk = os.read(fd, cap + 1 - len(data))
            except BlockingIOError:  # pragma: no cover - regular files never block
                continue
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > cap:
        raise ProviderConfigError(f"{what} {path} is larger than {cap} bytes: refused")
    return data


def read_api_key(owner: str, key_file: str | None, key_env: str | None) -> ApiKey | None:
    """The key named by ``api_key_file`` or ``api_key_env`` (one of them at most), or None.

    Refused, naming only where it was looked for (never the value): a missing
    file or variable, an empty key, or one with whitespace or control characters
    inside (it would break or smuggle headers).
    """
    if key_file is not None and key_env is not None:
        raise ProviderConfigError(f"{owner}: set api_key_file or api_key_env, not both")
    if key_file is not None:
        path = Path(key_file).expanduser()
        raw = _read_small_file(path, _MAX_KEY_BYTES, f"{owner}: api_key_file")
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise ProviderConfigError(f"{owner}: api_key_file {path} is not UTF-8 text") from None
        where = f"api_key_file {path}"
    elif key_env is not None:
        if key_env not in os.environ:
            raise ProviderConfigError(f"{owner}: api_key_env names ${key_env}, which is not set "
                                      "in this environment")
        text = os.environ[key_env].strip()
        where = f"${key_env}"
    else:
        return None
    if not text:
        raise ProviderConfigError(f"{owner}: the API key in {where} is empty")
    if any(c.isspace() or ord(c) < 0x21 or ord(c) == 0x7F for c in text):
        raise ProviderConfigError(f"{owner}: the API key in {where} holds whitespace or control "
                                  "characters; it must be one token")
    return ApiKey(text)


def tls_context(owner: str, ca_bundle: str | None) -> ssl.SSLContext | None:
    """The TLS trust for a provider: its ``ca_bundle``, else SSL_CERT_FILE/DIR, else None
    (None: the client's default public roots)."""
    if ca_bundle is not None:
        path = Path(ca_bundle).expanduser()
        _read_small_file(path, _MAX_CA_BYTES, f"{owner}: ca_bundle")  # type and size first
        try:
            return ssl.create_default_context(cafile=str(path))
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ProviderConfigError(f"{owner}: ca_bundle {path} holds no usable PEM CA "
                                      f"certificate ({exc})") from None
    env_file, env_dir = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if env_file or env_dir:
        try:
            return ssl.create_default_context(cafile=env_file or None, capath=env_dir or None)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ProviderConfigError(f"{owner}: SSL_CERT_FILE/SSL_CERT_DIR cannot be used "
                                      f"({exc})") from None
    return None
