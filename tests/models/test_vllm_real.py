"""Against the real vLLM (CPU build) serving the tiny model: the client, declared
sampling, errors surfaced from the server, and the server dying mid-stream.

Slow: the first test here (or in tests/cli/test_run_vllm.py) starts vLLM.
"""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from models import (
    Catalog,
    ChatRequest,
    ModelNotFound,
    OpenAIClient,
    ProviderConfig,
    ProviderConfigError,
    ProviderHTTPError,
    ProviderProtocolError,
    open_provider,
)
from tests.vllm_server import HONOURED, SERVED, shared_vllm, stop
from tools import native_tools
from tools._tool import validate_args

pytestmark = pytest.mark.slow

SPECS = [t.spec() for t in native_tools().values()]


def _client() -> OpenAIClient:
    return OpenAIClient([shared_vllm().base_url], max_retries=0, deadline_s=300)


def test_serve_is_healthy_and_lists_the_served_name() -> None:
    server = shared_vllm()
    assert server.alive()
    c = _client()
    assert c.list_models() == [SERVED]
    c.close()


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("tool", ["read", "glob"])
def test_named_tool_choice_gives_a_schema_valid_call(tool: str, stream: bool) -> None:
    c = _client()
    reply = c.chat(SERVED, ChatRequest(messages=[{"role": "user", "content": "go"}], tools=SPECS,
                                       tool_choice={"type": "function", "function": {"name": tool}},
                                       sampling={"temperature": 0, "max_tokens": 64}, stream=stream))
    c.close()
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert call.name == tool and call.id
    validate_args(native_tools()[tool], json.loads(call.arguments))  # raises if not schema-valid
    assert reply.usage is not None and reply.usage.prompt_tokens > 0


def test_vllm_silently_ignores_an_unknown_parameter_so_the_check_is_ours() -> None:
    c = _client()
    reply = c.chat(SERVED, ChatRequest(messages=[{"role": "user", "content": "x"}],
                                       sampling={"max_tokens": 2, "temperature": 0},
                                       extra_body={"mirostat_tau": 5.0}))
    c.close()
    assert reply.finish_reason in ("stop", "length")
    # Refused when the config is read (pydantic's ValidationError is a ValueError).
    with pytest.raises(ValueError, match="'mirostat_tau'.*does not honour"):
        ProviderConfig(name="v", api="openai", base_url=shared_vllm().base_url,
                       sampling=["temperature", "mirostat_tau"], model=SERVED)


def test_declared_but_unhonoured_parameter_is_refused_at_startup() -> None:
    server = shared_vllm()
    catalog = Catalog(models=(server.entry,))
    assert "min_p" not in HONOURED
    conf = ProviderConfig(name="v", api="openai", base_url=server.base_url,
                          sampling=["temperature", "min_p"], model=SERVED, catalog_entry="tiny")
    with pytest.raises(ProviderConfigError, match="'min_p'.*does not honour"):
        open_provider(conf, catalog=catalog)


def test_undeclared_parameter_is_refused_at_startup() -> None:
    conf = ProviderConfig(name="v", api="openai", base_url=shared_vllm().base_url,
                          sampling=["temperature"], model=SERVED)
    with pytest.raises(ProviderConfigError, match=r"'top_k'.*\[temperature\]"):
        open_provider(conf, sampling={"top_k": 3})


def test_negative_temperature_gets_vllms_400_surfaced() -> None:
    c = _client()
    with pytest.raises(ProviderHTTPError) as info:
        c.chat(SERVED, ChatRequest(messages=[{"role": "user", "content": "x"}], sampling={"temperature": -1}))
    c.close()
    assert info.value.status == 400
    assert "temperature" in info.value.server_message and "non-negative" in info.value.server_message
    assert info.value.server_message in str(info.value)


def test_unknown_model_name() -> None:
    c = _client()
    with pytest.raises(ModelNotFound, match="gpt-9"):
        c.chat("gpt-9", ChatRequest(messages=[{"role": "user", "content": "x"}]))
    c.close()
    conf = ProviderConfig(name="v", api="openai", base_url=shared_vllm().base_url, model="gpt-9")
    with pytest.raises(ModelNotFound, match=f"serves: {SERVED}"):
        open_provider(conf, check_model=True)


def test_zz_server_dying_mid_stream_is_reported_and_serve_exits_1() -> None:
    """Last: kills the shared server (a later user would start a new one)."""
    server = shared_vllm()
    pid = server.vllm_pid()
    assert pid is not None
    c = OpenAIClient([server.base_url], max_retries=0, deadline_s=300)
    first = threading.Event()

    def on_delta(_: object) -> None:
        if not first.is_set():
            first.set()
            os.killpg(pid, signal.SIGKILL)

    with pytest.raises(ProviderProtocolError, match="mid-reply"):
        c.chat(SERVED, ChatRequest(messages=[{"role": "user", "content": "x"}],
                                   # ignore_eos: the random tiny model may sample its end
                                   # token at once, and a reply that ends before the kill
                                   # lands proves nothing (failed so once under load)
                                   sampling={"temperature": 1.0, "max_tokens": 4000,
                                             "ignore_eos": True}), on_delta=on_delta)
    c.close()
    assert first.is_set()
    server.proc.wait(60)
    assert server.proc.returncode == 1
    stop(server)
    assert "vLLM stopped" in "".join(server.output)
