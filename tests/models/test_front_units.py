"""The front's token meter and the provider's relay setting, without servers."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from models import ProviderConfig
from models.service._front import UsageMeter


def _sse(*objs: object) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs) + b"data: [DONE]\n\n"


def test_usage_is_read_from_a_stream_split_at_any_byte() -> None:
    stream = _sse({"choices": [{"delta": {"content": "hi"}}], "model": "m"},
                  {"choices": [], "model": "m",
                   "usage": {"prompt_tokens": 11, "completion_tokens": 3}})
    for cut in range(1, len(stream)):
        meter = UsageMeter(streamed=True)
        meter.feed(stream[:cut])
        meter.feed(stream[cut:])
        meter.finish()
        assert (meter.tokens_in, meter.tokens_out, meter.model) == (11, 3, "m")


@pytest.mark.parametrize("junk", [b"data: {not json\n\n", b"data: [1, 2]\n\n",
                                  b'data: {"usage": {"prompt_tokens": -4}}\n\n',
                                  b'data: {"usage": "lots"}\n\n', b"\xff\xfe\n\n"])
def test_malformed_chunks_leave_the_counts_at_zero(junk: bytes) -> None:
    meter = UsageMeter(streamed=True)
    meter.feed(junk)
    meter.finish()
    assert (meter.tokens_in, meter.tokens_out) == (0, 0)


def test_a_whole_reply_is_read_once_and_an_oversized_one_is_not_kept() -> None:
    meter = UsageMeter(streamed=False)
    meter.feed(b'{"model": "m", "usage": {"prompt_tokens": 5,')
    meter.feed(b' "completion_tokens": 2}}')
    meter.finish()
    assert (meter.tokens_in, meter.tokens_out) == (5, 2)
    big = UsageMeter(streamed=True)
    big.feed(b"data: " + b"x" * (9 << 20))  # one unfinished line over 8 MiB
    big.feed(b'\n\ndata: {"usage": {"prompt_tokens": 1, "completion_tokens": 1}}\n\n')
    big.finish()
    assert (big.tokens_in, big.tokens_out) == (0, 0)


def _conf(**kw: object) -> ProviderConfig:
    return ProviderConfig.model_validate({"name": "site", "api": "openai",
                                          "base_url": "http://model-service/v1", **kw})


def test_unix_socket_setting() -> None:
    assert _conf(unix_socket="/run/abhed/model.sock").unix_socket == "/run/abhed/model.sock"
    for bad, says in (({"unix_socket": "run/model.sock"}, "absolute"),
                      ({"unix_socket": "/s", "base_url": "https://h/v1"}, "http://"),
                      ({"unix_socket": "/s", "base_url": ["http://a/v1", "http://b/v1"]},
                       "one http://"),
                      ({"unix_socket": "/s", "api_key_env": "K"}, "no api key"),
                      ({"unix_socket": "/" + "x" * 200}, "107")):
        with pytest.raises(ValidationError, match=says):
            _conf(**bad)
