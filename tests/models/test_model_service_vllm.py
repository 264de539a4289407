"""The model service in front of real vLLM (the CPU build, the suite's shared server): a
request through a host's relay and the front is answered by vLLM, streamed or whole, and
recorded with the tokens vLLM counted (for a stream: its ``include_usage`` chunk, which
the front asks for although the caller did not)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from installer._site_ca import SiteCA
from models import read_requests
from models.service import FrontSettings, ModelFront, ModelRelay, RelaySettings
from tests.vllm_server import SERVED, shared_vllm

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the relay's peer is root here")]


def test_a_request_through_relay_and_front_is_answered_by_vllm_and_its_tokens_recorded(
        tmp_path: Path) -> None:
    upstream = shared_vllm().base_url.removesuffix("/v1")
    ca = SiteCA(tmp_path / "ca")
    ca.init("lab", days=30)
    pems = {h: ca.issue(h, r, dns=[], ips=ips, days=30).pem
            for h, r, ips in (("model-a", "model", ["127.0.0.1"]), ("agent-1", "agent", []))}
    for h, pem in pems.items():
        assert pem is not None
        (tmp_path / f"{h}.pem").write_bytes(pem)
    (tmp_path / "engineers.json").write_text(json.dumps(
        {"format": "abhed-engineers/1", "engineers": {"root": {"uid": 0}}}))
    front = ModelFront(FrontSettings(
        listen_host="127.0.0.1", listen_port=0, ca=ca.cert_path,
        credential=tmp_path / "model-a.pem", crl=ca.crl_path, upstream=upstream,
        record=tmp_path / "requests.sqlite"))
    with front:
        relay = ModelRelay(RelaySettings(
            socket_path=tmp_path / "model.sock", upstreams=[f"https://127.0.0.1:{front.port}"],
            ca=ca.cert_path, credential=tmp_path / "agent-1.pem",
            enrolment=tmp_path / "engineers.json"))
        with relay, httpx.Client(transport=httpx.HTTPTransport(uds=str(tmp_path / "model.sock")),
                                 timeout=300) as c:
            body = {"model": SERVED, "messages": [{"role": "user", "content": "hello"}],
                    "max_tokens": 8, "temperature": 0}
            whole = c.post("http://model-service/v1/chat/completions", json=body,
                           headers={"X-Abhed-Session": "s-1", "X-Abhed-Request": "r-1"})
            assert whole.status_code == 200, whole.text
            usage = whole.json()["usage"]
            with c.stream("POST", "http://model-service/v1/chat/completions",
                          json={**body, "stream": True}) as resp:
                assert resp.status_code == 200
                lines = [line for line in resp.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]" and len(lines) >= 3
    streamed_usage = next(json.loads(line[5:])["usage"] for line in lines[:-1]
                          if json.loads(line[5:]).get("usage"))
    first, second = (s.record for s in read_requests(tmp_path / "requests.sqlite"))
    assert (first.host, first.engineer, first.session_id, first.request_id) == (
        "agent-1", "root", "s-1", "r-1")
    assert (first.tokens_in, first.tokens_out) == (usage["prompt_tokens"],
                                                   usage["completion_tokens"])
    assert (second.tokens_in, second.tokens_out) == (streamed_usage["prompt_tokens"],
                                                     streamed_usage["completion_tokens"])
    assert first.tokens_in > 0 and second.tokens_out > 0
    assert {first.outcome, second.outcome} == {"ok"} and first.model == SERVED
