"""The models package's one error root.

    ModelsError
    ├── ProviderConfigError     a provider or catalog entry refused at startup:
    │                           unknown api, undeclared or unhonoured sampling
    │                           parameter, value out of range
    ├── ProviderError           a request to a model server failed
    │   ├── ProviderUnavailable no base URL answered (refused, 502/503/504,
    │   │                       connect timeout) within the retries and deadline
    │   ├── ProviderHTTPError   the server answered 4xx/5xx; carries its own message
    │   │   └── ModelNotFound   the served model name is not on the server
    │   ├── ProviderProtocolError  the reply is not OpenAI-shaped, or the stream
    │   │   │                   ended before it finished (server died mid-stream)
    │   │   └── ModelStreamLost the stream broke after tokens had come back: not
    │   │                       retried, the turn ends (model_stream_lost)
    │   └── RequestCancelled    the caller interrupted the request
    ├── ServeError              vLLM could not be started or did not become healthy:
    │                           port taken, weights missing or altered, out of
    │                           memory, server exited
    └── RequestLogError         the model service's request record cannot be
        │                       opened, written or read (a record refused, the
        │                       file not a request log, an export malformed)
        └── RequestLogBroken    its hash chain does not hold: a record was
                                altered, removed, inserted or reordered

``models`` sits below ``appliance`` (which depends on it), so this root is not an
``AbhedError``; the CLI catches both.  Every message says what to do next.
"""

from __future__ import annotations

__all__ = [
    "ModelNotFound",
    "ModelStreamLost",
    "ModelsError",
    "ProviderConfigError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderProtocolError",
    "ProviderUnavailable",
    "RequestCancelled",
    "RequestLogBroken",
    "RequestLogError",
    "ServeError",
]


class ModelsError(Exception):
    """Root of every error the models package raises on purpose."""


class ProviderConfigError(ModelsError):
    """A provider or catalog entry is refused before any request is sent."""


class ProviderError(ModelsError):
    """A request to a model server failed.  ``retries`` names each attempt that was
    retried before it (the event log records them)."""

    retries: tuple[str, ...] = ()


class ProviderUnavailable(ProviderError):
    """No configured base URL answered within the retries and the deadline."""


class ProviderHTTPError(ProviderError):
    """The server answered with an error status; ``server_message`` is its own words."""

    def __init__(self, message: str, *, status: int, server_message: str) -> None:
        super().__init__(message)
        self.status = status
        self.server_message = server_message


class ModelNotFound(ProviderHTTPError):
    """The model name asked for is not served there."""


class ProviderProtocolError(ProviderError):
    """The reply could not be understood, or stopped before it was complete."""


class ModelStreamLost(ProviderProtocolError):
    """The model host went away after part of the reply had come back.  Not retried: the
    engineer has seen those tokens, and a second answer would not continue them."""


class RequestCancelled(ProviderError):
    """The caller cancelled the request (Ctrl-C, rpc ``abort``)."""


class ServeError(ModelsError):
    """vLLM did not start or did not become healthy; the message says why."""

    def __init__(self, message: str, *, reason: str = "failed", log_tail: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.log_tail = log_tail


class RequestLogError(ModelsError):
    """The request record could not be opened, written or read; the message says why."""


class RequestLogBroken(RequestLogError):
    """The chain does not hold at ``seq``: ``reason`` says how (altered, deleted, reordered)."""

    def __init__(self, where: str, seq: int, reason: str) -> None:
        super().__init__(
            f"the request record {where} is broken at record {seq}: {reason}. Nothing after "
            "it can be trusted; keep the file as evidence and compare it with the copy the "
            "site's collector received (syslog/SIEM)")
        self.where = where
        self.seq = seq
        self.reason = reason


class HostMismatch(ServeError):
    """A model host serves something other than the site declared: ``field``, ``declared``
    and ``found`` name the difference; the host must not take traffic."""

    def __init__(self, message: str, *, field: str, declared: str, found: str) -> None:
        super().__init__(message, reason="host_mismatch")
        self.field = field
        self.declared = declared
        self.found = found
