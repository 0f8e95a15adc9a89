"""The runtime's model client (``sagalog.agents.model_client``, on httpx) against the
stand-in model over loopback: a streamed answer is the plain answer, delta by delta,
and a stream cut short or refused carries the retry rule."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from sagalog.agents.failures import NonRetryableError, RetryableError
from sagalog.agents.model_client import ChatModel, StreamAssembly
from standins.model import ModelServer, serve

ASK = [{"role": "user", "content": "Draft the filing's first paragraph, please."}]
TOOL = {
    "type": "function",
    "function": {
        "name": "lookup_rule",
        "parameters": {
            "type": "object",
            "properties": {"rule": {"type": "string"}},
            "required": ["rule"],
        },
    },
}


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = serve()
    yield server
    server.shutdown()


def _model(server: ModelServer) -> ChatModel:
    return ChatModel(f"http://127.0.0.1:{server.server_address[1]}/v1", timeout_s=5)


def test_a_streamed_answer_is_the_plain_answer_delta_by_delta(model_server: ModelServer) -> None:
    model = _model(model_server)
    deltas: list[str] = []

    async def both() -> tuple[dict, dict]:
        streamed = await model.chat(
            model="m", messages=ASK, max_tokens=50, stream=True, on_delta=deltas.append
        )
        plain = await model.chat(model="m", messages=ASK, max_tokens=50)
        return streamed, plain

    streamed, plain = asyncio.run(both())
    assert len(deltas) > 5
    assert "".join(deltas) == plain["choices"][0]["message"]["content"]
    assert streamed["choices"] == plain["choices"]
    assert streamed["usage"] == plain["usage"]  # stream_options.include_usage


def test_streamed_tool_calls_are_assembled(model_server: ModelServer) -> None:
    answer = asyncio.run(
        _model(model_server).chat(model="m", messages=ASK, max_tokens=50, stream=True, tools=[TOOL])
    )
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "lookup_rule"
    assert json.loads(call["function"]["arguments"]) == {"rule": ASK[0]["content"]}


def test_a_stream_cut_before_done_may_be_retried() -> None:
    assembly = StreamAssembly("http://model/v1/chat/completions")
    assembly.feed('data: {"choices": [{"index": 0, "delta": {"content": "Half"}}]}')
    with pytest.raises(RetryableError, match=r"ended before 'data: \[DONE\]'"):
        assembly.completion("m")


def test_a_chunk_that_is_not_json_is_refused_naming_it() -> None:
    with pytest.raises(NonRetryableError, match="not JSON: 'nope'"):
        StreamAssembly("http://model/v1/chat/completions").feed("data: nope")


def test_refusals_carry_the_retry_rule(model_server: ModelServer) -> None:
    model = _model(model_server)
    with pytest.raises(NonRetryableError, match="answered 400"):
        asyncio.run(model.chat(model="", messages=ASK, max_tokens=5, stream=True))
    model_server.faults.fail_next = 1
    with pytest.raises(RetryableError, match="answered 503"):
        asyncio.run(model.chat(model="m", messages=ASK, max_tokens=5, stream=True))


def test_an_unreachable_endpoint_may_be_retried() -> None:
    with pytest.raises(RetryableError, match="unreachable"):
        asyncio.run(
            ChatModel("http://127.0.0.1:9/v1", timeout_s=1).chat(
                model="m", messages=ASK, max_tokens=5
            )
        )


def test_a_base_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValueError, match="http"):
        ChatModel("127.0.0.1:8089/v1")
