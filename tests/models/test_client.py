"""The OpenAI-compatible client against the scripted server (a real socket)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from models import (
    CancelToken,
    ChatRequest,
    Delta,
    ModelNotFound,
    ModelStreamLost,
    OpenAIClient,
    ProviderConfig,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderUnavailable,
    RequestCancelled,
    open_provider,
)
from models._chunks import StreamAssembler
from models.scripted import ScriptedServer
from tests.helpers import wait_for

MSG = [{"role": "user", "content": "hi"}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_stream_assembles_text_and_several_tool_calls(chunk: int) -> None:
    step = {"text": "thinking…", "chunk_chars": chunk,
            "tool_calls": [{"name": "read", "arguments": {"path": "/a", "limit": 5}},
                           {"name": "glob", "arguments": {"pattern": "**/*.py"}}]}
    with ScriptedServer([step]) as s:
        deltas: list[Delta] = []
        c = OpenAIClient([s.base_url])
        r = c.chat("scripted", ChatRequest(MSG), on_delta=deltas.append)
        c.close()
    assert r.text == "thinking…"
    assert [(t.name, json.loads(t.arguments)) for t in r.tool_calls] == [
        ("read", {"path": "/a", "limit": 5}), ("glob", {"pattern": "**/*.py"})]
    assert r.finish_reason == "tool_calls" and r.usage is not None and r.usage.completion_tokens > 0
    assert "".join(d.text for d in deltas if d.kind == "text") == "thinking…"
    assert s.requests[0]["stream"] is True and s.requests[0]["stream_options"] == {"include_usage": True}


def test_assembler_tolerates_server_quirks() -> None:
    asm = StreamAssembler()
    # no index (keyed by id), name split across deltas, id repeated on every delta
    asm.feed({"choices": [{"delta": {"tool_calls": [{"id": "x", "function": {"name": "re"}}]}}]})
    asm.feed({"choices": [{"delta": {"tool_calls": [{"id": "x", "function": {"name": "ad", "arguments": "{\"a\""}}]}}]})
    asm.feed({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": ": 1}"}}]}, "finish_reason": "tool_calls"}]})
    r = asm.reply()
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [("x", "read", '{"a": 1}')]


@pytest.mark.parametrize("chunk", [["x"], {"choices": "no"}, {"choices": [{"delta": []}]},
                                   {"choices": [{"delta": {"tool_calls": ["bad"]}}]},
                                   {"error": {"message": "engine dead"}}])
def test_assembler_refuses_nonsense(chunk: Any) -> None:
    with pytest.raises(ProviderProtocolError):
        StreamAssembler().feed(chunk)


def test_non_streaming_reply() -> None:
    with ScriptedServer([{"text": "ok", "tool_calls": [{"name": "read", "arguments": "{broken"}]}]) as s:
        c = OpenAIClient([s.base_url])
        r = c.chat("scripted", ChatRequest(MSG, stream=False))
        c.close()
    assert r.text == "ok" and r.tool_calls[0].arguments == "{broken"


def test_http_errors_carry_the_servers_message() -> None:
    with ScriptedServer([{"status": 400, "error": "max_tokens must be at least 1"},
                         {"status": 422, "error": "bad field"}]) as s:
        c = OpenAIClient([s.base_url], max_retries=3)
        with pytest.raises(ProviderHTTPError) as info:
            c.chat("scripted", ChatRequest(MSG))
        assert info.value.status == 400 and info.value.server_message == "max_tokens must be at least 1"
        with pytest.raises(ProviderHTTPError, match="bad field"):
            c.chat("scripted", ChatRequest(MSG))
        with pytest.raises(ModelNotFound, match="/v1/models"):
            c.chat("other", ChatRequest(MSG))
        c.close()
    assert len(s.requests) == 2  # 4xx are never retried


def test_transient_503_is_retried_then_succeeds() -> None:
    with ScriptedServer([{"status": 503, "error": "loading"}, {"status": 502}, {"text": "fine"}]) as s:
        c = OpenAIClient([s.base_url], max_retries=3, backoff_s=0.01)
        assert c.chat("scripted", ChatRequest(MSG)).text == "fine"
        c.close()
    assert len(s.requests) == 3


def test_retries_are_bounded() -> None:
    with ScriptedServer([{"status": 503}] * 10) as s:
        c = OpenAIClient([s.base_url], max_retries=2, backoff_s=0.01)
        with pytest.raises(ProviderUnavailable, match="after 3 attempts"):
            c.chat("scripted", ChatRequest(MSG))
        c.close()
    assert len(s.requests) == 3


def test_connection_refused_fails_over_to_the_next_replica() -> None:
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    with ScriptedServer([{"text": "from replica 2"}]) as s:
        c = OpenAIClient([dead, s.base_url], max_retries=1, backoff_s=0.01)
        assert c.chat("scripted", ChatRequest(MSG)).text == "from replica 2"
        c.close()


def test_refused_everywhere_says_how_to_start_a_server() -> None:
    c = OpenAIClient([f"http://127.0.0.1:{_free_port()}/v1"], max_retries=1, backoff_s=0.01)
    with pytest.raises(ProviderUnavailable, match="abhed serve"):
        c.list_models()
    c.close()


def test_deadline_covers_retries() -> None:
    with ScriptedServer([{"status": 503}] * 100) as s:
        c = OpenAIClient([s.base_url], max_retries=10, backoff_s=0.5, deadline_s=0.4)
        with pytest.raises(ProviderUnavailable, match="deadline|attempts"):
            c.chat("scripted", ChatRequest(MSG))
        c.close()
    assert 1 <= len(s.requests) <= 3


def test_silent_server_is_a_read_timeout_not_retried() -> None:
    with ScriptedServer([{"hang": True}]) as s:
        c = OpenAIClient([s.base_url], read_timeout_s=0.3, max_retries=3)
        with pytest.raises((ProviderUnavailable, ProviderProtocolError)):
            c.chat("scripted", ChatRequest(MSG))
        c.close()
    assert len(s.requests) == 1


def test_stream_cut_short_is_a_protocol_error() -> None:
    with ScriptedServer([{"text": "abcdefgh", "chunk_chars": 1, "die_after_chunks": 4}]) as s:
        c = OpenAIClient([s.base_url])
        with pytest.raises(ProviderProtocolError, match="died mid-reply"):
            c.chat("scripted", ChatRequest(MSG))
        c.close()


def test_cancel_unblocks_a_hanging_stream_quickly() -> None:
    token = CancelToken()
    with ScriptedServer([{"hang": True}]) as s:
        c = OpenAIClient([s.base_url])
        threading.Timer(0.3, token.cancel, args=("test",)).start()
        t0 = time.monotonic()
        with pytest.raises(RequestCancelled, match="test"):
            c.chat("scripted", ChatRequest(MSG), cancel=token)
        assert time.monotonic() - t0 < 10
        c.close()


def test_cancel_of_a_non_streamed_request_nobody_answered_is_cancelled_not_unavailable() -> None:
    # The bug (found by the probe's Ctrl-C, issue 33): a cancel that shut the socket while the
    # server had sent nothing yet (vLLM's queue full) came back as ProviderUnavailable.
    token = CancelToken()
    with ScriptedServer([{"hang": True}]) as s:
        c = OpenAIClient([s.base_url], max_retries=3)
        got: list[BaseException] = []

        def ask() -> None:
            try:
                c.chat("scripted", ChatRequest(MSG, stream=False), cancel=token)
            except BaseException as exc:  # what the call raised is the subject
                got.append(exc)

        t = threading.Thread(target=ask, daemon=True)
        t.start()
        # The request is at the server, which will never answer.
        wait_for(lambda: s.requests, 30, what="the request to reach the server")
        token.cancel("test")
        t.join(30)
        c.close()
    assert len(got) == 1 and isinstance(got[0], RequestCancelled), got
    assert len(s.requests) == 1  # not retried


def test_proxy_environment_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    with ScriptedServer([{"text": "direct"}]) as s:
        c = OpenAIClient([s.base_url], max_retries=0)
        assert c.chat("scripted", ChatRequest(MSG)).text == "direct"
        c.close()


class _Garbage(BaseHTTPRequestHandler):
    body = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize("body", [b"data: {not json\n\n", b"data: [1]\n\n",
                                  b"data: " + b"x" * (9 * 1024 * 1024) + b"\n\n",
                                  b": comment only\n\n"])
def test_hostile_streams_are_protocol_errors(body: bytes) -> None:
    handler = type("H", (_Garbage,), {"body": body})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        c = OpenAIClient([f"http://127.0.0.1:{httpd.server_address[1]}/v1"], max_retries=0)
        with pytest.raises(ProviderProtocolError):
            c.chat("m", ChatRequest(MSG))
        c.close()
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_provider_merges_params_and_picks_the_served_model() -> None:
    with ScriptedServer([{"text": "a"}]) as s:
        conf = ProviderConfig(name="p", api="openai", base_url=s.base_url, sampling=["temperature", "seed"],
                              params={"temperature": 0.5})
        p = open_provider(conf, sampling={"seed": 3})
        assert p.model == "scripted"
        p.complete(ChatRequest(MSG))
        p.close()
    assert s.requests[-1]["temperature"] == 0.5 and s.requests[-1]["seed"] == 3


def test_a_host_gone_before_the_first_token_is_retried_and_named() -> None:
    # The first attempt's stream is cut after the role chunk (no token yet); a 503 from
    # the router next; the third answers.  One reply, both retries named.
    with ScriptedServer([{"text": "hello", "die_after_chunks": 1},
                         {"status": 503, "error": "no healthy worker"},
                         {"text": "hello"}]) as s:
        c = OpenAIClient([s.base_url], max_retries=3, backoff_s=0.01)
        seen: list[str] = []
        reply = c.chat("scripted", ChatRequest(MSG, request_id="r-1"),
                       on_delta=lambda d: seen.append(d.text))
        c.close()
    assert reply.text == "hello" and "".join(seen) == "hello"
    assert len(reply.retries) == 2
    assert "before the first token" in reply.retries[0] and "HTTP 503" in reply.retries[1]
    assert [i[1] for i in s.ids] == ["r-1"] * 3  # one request id across the retries


def test_a_host_gone_after_tokens_is_a_named_loss_never_retried() -> None:
    with ScriptedServer([{"text": "abcdefgh", "chunk_chars": 1, "die_after_chunks": 4},
                         {"text": "never sent"}]) as s:
        c = OpenAIClient([s.base_url], max_retries=3, backoff_s=0.01)
        seen: list[str] = []
        with pytest.raises(ModelStreamLost, match="model_stream_lost") as info:
            c.chat("scripted", ChatRequest(MSG), on_delta=lambda d: seen.append(d.text))
        c.close()
    assert "".join(seen) == "abc" and len(s.requests) == 1
    assert info.value.retries == ()


def test_a_host_gone_for_good_ends_with_every_retry_named() -> None:
    s = ScriptedServer().start()
    url = s.base_url
    s.stop()  # the host is gone: every attempt is refused outright
    c = OpenAIClient([url], max_retries=2, backoff_s=0.01)
    with pytest.raises(ProviderUnavailable, match="after 3 attempts") as info:
        c.chat("scripted", ChatRequest(MSG))
    c.close()
    assert len(info.value.retries) == 3 and all("ConnectError" in r for r in info.value.retries)


def test_the_routers_500_for_a_replica_that_did_not_answer_is_retried_and_named() -> None:
    """The bug (tests/site/test_failover.py): a model host stopped behind vllm-router, the
    router answered the next request 500 'error sending request for url' before its health
    check noticed, and the session ended at its first request.  Nothing reached a model, so
    it is retried; a 500 of another kind is not."""
    import httpx

    from models import OpenAIClient, ProviderError

    answers = [httpx.Response(500, text="Request failed: error sending request for url "
                              "(http://10.0.0.6:8000/v1/models)"),
               httpx.Response(200, json={"data": [{"id": "tiny"}]})]
    client = OpenAIClient(["http://router/v1"], max_retries=2, backoff_s=0.0,
                          transport=httpx.MockTransport(lambda req: answers.pop(0)))
    assert client.list_models() == ["tiny"] and not answers
    other = OpenAIClient(["http://router/v1"], max_retries=2, backoff_s=0.0,
                         transport=httpx.MockTransport(
                             lambda req: httpx.Response(500, json={"error": {"message": "boom"}})))
    with pytest.raises(ProviderError, match="boom"):
        other.list_models()


def _sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}
ENGINE_DEAD = {"error": {"message": "EngineCore encountered an issue. See stack trace (above) "
                                   "for the root cause.", "code": 500}}


def test_a_servers_error_chunk_before_the_first_token_is_retried_and_named() -> None:
    """vLLM's own word when its engine dies under a host being stopped (seen in
    tests/site/test_failover.py): the stream breaks, so before any token it is sent again."""
    import httpx

    good = _sse({"choices": [{"index": 0, "delta": {"content": "hi"}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + b"data: [DONE]\n\n"
    answers = [httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=_sse(ROLE, ENGINE_DEAD)),
               httpx.Response(200, headers={"content-type": "text/event-stream"}, content=good)]
    c = OpenAIClient(["http://router/v1"], max_retries=2, backoff_s=0.0,
                     transport=httpx.MockTransport(lambda req: answers.pop(0)))
    reply = c.chat("tiny", ChatRequest(MSG))
    c.close()
    assert reply.text == "hi" and len(reply.retries) == 1
    assert "before the first token" in reply.retries[0]
    assert "EngineCore encountered an issue" in reply.retries[0]


def test_a_servers_error_chunk_after_tokens_is_a_named_loss_never_retried() -> None:
    import httpx

    sent: list[int] = []

    def answer(req: httpx.Request) -> httpx.Response:
        sent.append(1)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(
            ROLE, {"choices": [{"index": 0, "delta": {"content": "abc"}}]}, ENGINE_DEAD))

    c = OpenAIClient(["http://router/v1"], max_retries=3, backoff_s=0.0,
                     transport=httpx.MockTransport(answer))
    with pytest.raises(ModelStreamLost, match="model_stream_lost") as info:
        c.chat("tiny", ChatRequest(MSG))
    c.close()
    assert "EngineCore encountered an issue" in str(info.value) and sent == [1]
