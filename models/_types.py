"""What goes to a model server and what comes back, independent of the wire."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["CancelToken", "ChatRequest", "Delta", "ModelReply", "Provider", "ToolCall", "Usage"]


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model wrote it; ``arguments`` is raw JSON text and may be malformed."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class ModelReply:
    """One assistant turn, assembled."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str = ""
    retries: tuple[str, ...] = ()  # attempts retried before this reply (host gone, no token yet)


@dataclass(frozen=True)
class Delta:
    """A piece of a streamed turn, for rendering progress as it arrives."""

    kind: Literal["text", "tool_call"]
    text: str = ""
    index: int = 0
    name: str | None = None


@dataclass
class ChatRequest:
    """A chat completion request; ``sampling`` is already checked against the declared list."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    stream: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    # Who asks, as the agent asserts it to the model service (sent as the X-Abhed-Session
    # and X-Abhed-Request headers, recorded on both sides so the auditor can join them).
    # One request id per turn: the client's retries of the turn send the same one.
    session_id: str | None = None
    request_id: str | None = None


class CancelToken:
    """Set by an interrupt; in-flight work registered with it is closed at once.

    A blocked socket read does not look at a flag, so the client registers a
    callback that closes its response: the read then fails and the stream ends
    within milliseconds instead of at the next chunk.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "interrupted") -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            try:
                cb()
            except Exception:
                pass

    def on_cancel(self, cb: Callable[[], None]) -> Callable[[], None]:
        """Run ``cb`` on cancel (now, if already cancelled); returns a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(cb)

                def remove() -> None:
                    with self._lock:
                        if cb in self._callbacks:
                            self._callbacks.remove(cb)
                return remove
        cb()
        return lambda: None

    def wait(self, timeout_s: float) -> bool:
        return self._event.wait(timeout_s)


class Provider(Protocol):
    """A model endpoint the loop can talk to."""

    name: str
    model: str

    def complete(self, request: ChatRequest, *, on_delta: Callable[[Delta], None] | None = None,
                 cancel: CancelToken | None = None) -> ModelReply: ...
