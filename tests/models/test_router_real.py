"""The vLLM project's router (vllm-router, from scripts/router-env) over two replicas:
requests spread over both, one replica stopped and the others go on, none healthy and
the client's error says so.  The replicas are scripted servers here (two real vLLM CPU
servers do not fit this machine beside the suite); the router is the real one, started
from the command `abhed serve --dry-run` prints.

Slow: starts the router (a few seconds)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from models import ChatRequest, OpenAIClient, ProviderError, RouterSettings, router_command
from models.scripted import ScriptedServer, ScriptStep
from tests.helpers import router_python, wait_for

pytestmark = pytest.mark.slow

MSG = [{"role": "user", "content": "hi"}]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def routed(tmp_path: Path) -> Iterator[tuple[OpenAIClient, list[ScriptedServer], RouterSettings]]:
    a = ScriptedServer(responder=lambda body: ScriptStep(text="from-a")).start()
    b = ScriptedServer(responder=lambda body: ScriptStep(text="from-b")).start()
    settings = RouterSettings(replicas=(a.base_url, b.base_url), policy="round_robin",
                              port=_port(), health_check_interval_s=1)
    log = (tmp_path / "router.log").open("wb")
    proc = subprocess.Popen(router_command(settings, router_python()), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    client = OpenAIClient([settings.base_url], max_retries=3, backoff_s=0.05, deadline_s=60)
    try:
        def up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", settings.port), timeout=1):
                    return True
            except OSError:
                return False
        wait_for(up, 60, what="the router listening")
        yield client, [a, b], settings
    finally:
        client.close()
        proc.terminate()
        proc.wait(20)
        log.close()
        for s in (a, b):
            s.stop()  # again for one a test stopped: a no-op


def test_requests_spread_over_both_and_go_on_when_one_stops(
        routed: tuple[OpenAIClient, list[ScriptedServer], RouterSettings]) -> None:
    client, (a, b), _ = routed
    answers = {client.chat("scripted", ChatRequest(MSG)).text for _ in range(4)}
    assert answers == {"from-a", "from-b"}
    a.stop()
    after = [client.chat("scripted", ChatRequest(MSG)).text for _ in range(4)]
    assert after == ["from-b"] * 4


def test_no_healthy_replica_is_a_clear_error(
        routed: tuple[OpenAIClient, list[ScriptedServer], RouterSettings]) -> None:
    client, servers, _ = routed
    assert client.chat("scripted", ChatRequest(MSG)).text in ("from-a", "from-b")
    for s in servers:
        s.stop()
    with pytest.raises(ProviderError) as info:
        client.chat("scripted", ChatRequest(MSG))
    assert info.value.retries or "HTTP" in str(info.value)
