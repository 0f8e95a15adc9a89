"""The stand-in model (``standins.model``) as an OpenAI-compatible client sees it, over
HTTP on loopback: token usage, an agent loop of tool calls, its call log, faults."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from risk_agent.llm import chat_completion
from sagalog.agents.failures import RetryableError
from standins.model import ModelServer, complete, count_tokens, serve

from .timing import GENEROUS_S

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_filings",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["query", "limit"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "draft_section",
            "parameters": {
                "type": "object",
                "properties": {"heading": {"type": "string"}},
                "required": ["heading"],
            },
        },
    },
]
ASK = "Prepare the annual emissions filing for Acme Ltd."


@pytest.fixture
def model() -> Iterator[str]:
    server: ModelServer = serve()
    host, port = server.server_address[:2]
    yield f"http://{host!s}:{port}"
    server.shutdown()
    server.server_close()


def _post(url: str, body: dict[str, Any], key: str = "") -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json", **({"Idempotency-Key": key} if key else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=GENEROUS_S) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def _calls(url: str) -> list[list[Any]]:
    with urllib.request.urlopen(f"{url}/calls", timeout=GENEROUS_S) as reply:
        return list(json.load(reply)["calls"])


def test_a_completion_reports_its_usage_and_the_log_keeps_it(model: str) -> None:
    body = {"model": "standin-1", "messages": [{"role": "user", "content": ASK}]}
    status, answer = _post(f"{model}/v1/chat/completions", body, key="k-1")
    assert status == 200
    content = answer["choices"][0]["message"]["content"]
    usage = answer["usage"]
    assert usage["prompt_tokens"] == 3 + count_tokens(ASK)
    assert usage["completion_tokens"] == count_tokens(content)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    [call] = _calls(model)
    assert call[1:] == ["standin-1", "k-1", 200, usage["prompt_tokens"], usage["completion_tokens"]]


def test_an_agent_loop_calls_each_tool_in_turn_then_answers() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    names = []
    for _ in range(3):
        answer = complete({"model": "m", "messages": messages, "tools": TOOLS})
        choice = answer["choices"][0]
        message = choice["message"]
        if choice["finish_reason"] != "tool_calls":
            break
        [call] = message["tool_calls"]
        names.append(call["function"]["name"])
        messages += [message, {"role": "tool", "tool_call_id": call["id"], "content": "ok"}]
    assert names == ["search_filings", "draft_section"]
    first = json.loads(messages[1]["tool_calls"][0]["function"]["arguments"])
    assert first == {"query": ASK, "limit": 1}
    assert choice["finish_reason"] == "stop"
    assert "search_filings, draft_section" in message["content"]


def test_the_same_request_gets_the_same_answer() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": ASK}], "tools": TOOLS}
    assert complete(body) == complete(body)


def test_max_tokens_cuts_the_answer_as_a_real_model_does() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": ASK}], "max_tokens": 4}
    answer = complete(body)
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "'model' is required"),
        ({"model": "m", "messages": []}, "'messages' is required"),
        ({"model": "m", "messages": [{"role": "user"}], "tools": [{"type": "x"}]}, "tools[0]"),
    ],
)
def test_a_request_that_is_not_a_chat_completion_gets_a_400_naming_it(
    model: str, body: dict[str, Any], message: str
) -> None:
    status, answer = _post(f"{model}/chat/completions", body)
    assert status == 400
    assert message in answer["error"]["message"]


def test_the_risk_agent_s_client_reads_it_and_an_outage_is_retryable(model: str) -> None:
    answer = chat_completion(
        f"{model}/v1", "standin-1", [{"role": "user", "content": ASK}], idempotency_key="k-2"
    )
    assert json.loads(answer["content"])["answer"].startswith("Answer to: Prepare")
    _post(f"{model}/faults", {"outage": True})
    with pytest.raises(RetryableError, match="503"):
        chat_completion(f"{model}/v1", "standin-1", [{"role": "user", "content": ASK}])
    assert [call[3] for call in _calls(model)] == [200, 503]


def test_a_repeated_idempotency_key_is_answered_and_counted_again(model: str) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": ASK}]}
    _post(f"{model}/v1/chat/completions", body, key="same")
    _post(f"{model}/v1/chat/completions", body, key="same")
    assert [call[2] for call in _calls(model)] == ["same", "same"]
