"""Turn streamed chat-completion chunks into one :class:`ModelReply`.

Tool calls arrive in pieces: the first delta for an ``index`` carries ``id``
and ``function.name``, later ones append to ``function.arguments``.  Servers
differ in small ways (a missing ``index``, a name split across deltas, ids
repeated on every delta), so the assembler keys on ``index``, falls back to
``id``, and concatenates only what is new.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models._errors import ProviderProtocolError
from models._types import Delta, ModelReply, ToolCall, Usage

__all__ = ["StreamAssembler", "StreamErrorReported", "reply_from_message", "usage_from"]


def usage_from(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    p, c = raw.get("prompt_tokens"), raw.get("completion_tokens")
    return Usage(p if isinstance(p, int) else 0, c if isinstance(c, int) else 0)


class _Partial:
    __slots__ = ("args", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []


class StreamErrorReported(ProviderProtocolError):
    """The server ended a stream with an error chunk (vLLM's when its engine dies under a
    host being stopped: "EngineCore encountered an issue").  The client treats it as the
    stream breaking, by the server's own word: retried before the first token, a named
    loss after it (models._openai)."""


class StreamAssembler:
    """Feed it parsed chunks; ask it for the reply when the stream is done."""

    def __init__(self, on_delta: Callable[[Delta], None] | None = None) -> None:
        self.on_delta = on_delta
        self.text: list[str] = []
        self.calls: dict[int, _Partial] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model = ""

    def feed(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            raise ProviderProtocolError(f"stream chunk is not a JSON object: {str(chunk)[:200]}")
        if "error" in chunk and not chunk.get("choices"):
            err = chunk["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            raise StreamErrorReported(f"the server reported an error mid-stream: {msg}")
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        usage = usage_from(chunk.get("usage"))
        if usage is not None:
            self.usage = usage
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise ProviderProtocolError("stream chunk 'choices' is not a list")
        for choice in choices[:1]:
            if not isinstance(choice, dict):
                raise ProviderProtocolError("stream chunk choice is not an object")
            delta = choice.get("delta")
            delta = {} if delta is None else delta
            if not isinstance(delta, dict):
                raise ProviderProtocolError("stream chunk 'delta' is not an object")
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                if self.on_delta:
                    self.on_delta(Delta("text", content))
            for raw in delta.get("tool_calls") or []:
                self._tool_delta(raw)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def _tool_delta(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise ProviderProtocolError("a tool_calls delta is not an object")
        index = raw.get("index")
        call_id = raw.get("id") if isinstance(raw.get("id"), str) else ""
        if not isinstance(index, int) or isinstance(index, bool):
            # Fall back to the id; a delta with neither continues the last call.
            index = next((i for i, p in self.calls.items() if call_id and p.id == call_id),
                         len(self.calls) if call_id or not self.calls else max(self.calls))
        part = self.calls.setdefault(index, _Partial())
        if call_id and not part.id:
            part.id = call_id
        fn = raw.get("function") or {}
        if not isinstance(fn, dict):
            raise ProviderProtocolError("a tool_calls delta's 'function' is not an object")
        name = fn.get("name")
        if isinstance(name, str) and name and not part.name.endswith(name):
            part.name += name
        args = fn.get("arguments")
        if isinstance(args, str) and args:
            part.args.append(args)
        if self.on_delta:
            self.on_delta(Delta("tool_call", args if isinstance(args, str) else "", index,
                                part.name or None))

    def reply(self) -> ModelReply:
        calls = tuple(
            ToolCall(p.id or f"call-{i}", p.name, "".join(p.args))
            for i, p in sorted(self.calls.items())
        )
        return ModelReply("".join(self.text), calls, self.finish_reason, self.usage, self.model)


def reply_from_message(body: Any) -> ModelReply:
    """A non-streamed response body -> :class:`ModelReply`."""
    try:
        choice = body["choices"][0]
        msg = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ProviderProtocolError(
            f"response has no choices[0].message: {str(body)[:200]}") from None
    calls: list[ToolCall] = []
    for i, raw in enumerate(msg.get("tool_calls") or []):
        fn = raw.get("function") or {} if isinstance(raw, dict) else {}
        calls.append(ToolCall(str(raw.get("id") or f"call-{i}") if isinstance(raw, dict) else f"call-{i}",
                              str(fn.get("name") or ""), str(fn.get("arguments") or "")))
    content = msg.get("content")
    return ModelReply(content if isinstance(content, str) else "", tuple(calls),
                      choice.get("finish_reason"), usage_from(body.get("usage")),
                      str(body.get("model") or ""))
