"""A call's estimate (``sagalog.budgets.estimate``): tiktoken counts, framing, price math.

Uses the encodings ``make install`` puts in the cache (``sagalog.budgets.tokenizer_files``);
none is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sagalog.budgets import estimate as estimate_module
from sagalog.budgets.estimate import (
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    Estimate,
    Price,
    encoding_for,
    estimate,
    prompt_tokens,
)
from sagalog.budgets.ledger import BudgetLimits, Granted, Ledger, Usage
from sagalog.budgets.tokenizer_files import PROVISION_COMMAND
from sagalog.errors import ConfigurationError

HELLO = [{"role": "user", "content": "hello world"}]
#: "user" is 1 token and "hello world" 2, in cl100k_base and in o200k_base.
HELLO_TOKENS = TOKENS_PER_MESSAGE + 1 + 2 + REPLY_PRIMING
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Today's weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.mark.parametrize("model", ["gpt-4", "gpt-4o"])
def test_hello_world_is_two_tokens_in_both_current_encodings(model: str) -> None:
    assert len(encoding_for(model).encode("hello world")) == 2


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-oss-20b", "o200k_harmony"),
        ("text-davinci-003", "p50k_base"),
        # An OpenAI-compatible server's own model name: counted as OpenAI's current models.
        ("llama-3.1-8b-instruct", "o200k_base"),
    ],
)
def test_the_encoding_follows_the_model(model: str, encoding: str) -> None:
    assert encoding_for(model).name == encoding


@pytest.mark.parametrize("model", ["gpt-4", "gpt-4o"])
def test_a_message_costs_its_framing_its_role_and_its_content(model: str) -> None:
    assert prompt_tokens(HELLO, model) == HELLO_TOKENS == 9


def test_each_message_adds_its_own_framing() -> None:
    two = [{"role": "system", "content": "hello world"}, *HELLO]
    assert prompt_tokens(two, "gpt-4o") == HELLO_TOKENS + TOKENS_PER_MESSAGE + 1 + 2


def test_a_name_costs_its_tokens_and_one_more() -> None:
    named = [{**HELLO[0], "name": "alice"}]  # "alice": 1 token
    assert prompt_tokens(named, "gpt-4o") == HELLO_TOKENS + 1 + 1


def test_text_parts_count_as_their_text() -> None:
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello world"}]}]
    assert prompt_tokens(parts, "gpt-4o") == HELLO_TOKENS


def test_tool_definitions_count_as_their_compact_json() -> None:
    as_json = json.dumps([WEATHER_TOOL], separators=(",", ":"))
    expected = HELLO_TOKENS + len(encoding_for("gpt-4o").encode(as_json))
    assert prompt_tokens(HELLO, "gpt-4o", tools=[WEATHER_TOOL]) == expected
    assert prompt_tokens(HELLO, "gpt-4o", tools=[]) == HELLO_TOKENS


def test_an_assistant_message_calling_a_tool_needs_no_content_and_its_call_counts() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    conversation = [*HELLO, {"role": "assistant", "content": None, "tool_calls": [call]}]
    calls_json = json.dumps([call], separators=(",", ":"))
    assistant = TOKENS_PER_MESSAGE + 1 + len(encoding_for("gpt-4o").encode(calls_json))
    assert prompt_tokens(conversation, "gpt-4o") == HELLO_TOKENS + assistant


def test_special_token_markers_in_a_message_are_counted_as_text() -> None:
    marker = [{"role": "user", "content": "<|endoftext|>"}]
    assert prompt_tokens(marker, "gpt-4o") > TOKENS_PER_MESSAGE + 1 + 1 + REPLY_PRIMING


def test_the_estimate_is_the_prompt_plus_all_of_max_tokens() -> None:
    price = Price.per_million(input="2.50", output="10.00")
    found = estimate(HELLO, model="gpt-4o", max_tokens=100, price=price)
    # 9 x 2.5 + 100 x 10 = 1022.5 micros, rounded up.
    assert found == Estimate(tokens=HELLO_TOKENS + 100, micros=1023)


def test_an_estimate_is_what_a_ledger_reserves() -> None:
    found = estimate(HELLO, model="gpt-4o", max_tokens=10, price=Price(0, 0))
    ledger = Ledger("tenant-a", BudgetLimits(tokens_per_minute=1_000))
    granted = ledger.reserve("call-1", found, now_ms=0)
    assert isinstance(granted, Granted)
    assert ledger.spent(now_ms=0) == (Usage(), Usage(tokens=HELLO_TOKENS + 10))


def test_money_rounds_up_to_the_next_micro() -> None:
    assert Price(1, 0).cost_micros(input_tokens=1, output_tokens=0) == 1
    assert Price(2_000_000, 0).cost_micros(input_tokens=3, output_tokens=0) == 6
    assert Price(0, 0).cost_micros(input_tokens=10**9, output_tokens=10**9) == 0


def test_money_rounds_once_on_the_exact_sum() -> None:
    # Half a micro each: one micro in all, where rounding each part would say two.
    assert Price(500_000, 500_000).cost_micros(input_tokens=1, output_tokens=1) == 1


def test_money_is_integer_arithmetic() -> None:
    # 30 tokens at 0.1 micro: 3 exactly; in floats 30 * 0.1 is 3.0000000000000004,
    # which would round up to 4.
    assert Price(100_000, 0).cost_micros(input_tokens=30, output_tokens=0) == 3


def test_a_price_reads_the_amounts_price_lists_write() -> None:
    assert Price.per_million(input="0.15", output="0.6") == Price(150_000, 600_000)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Price(-1, 0), "input_micros_per_million"),
        (lambda: Price(0, 1.5), "output_micros_per_million"),  # type: ignore[arg-type]
        (lambda: Price.per_million(input="cheap", output="1"), "input tokens"),
        (lambda: Price.per_million(input="1", output="0.0000001"), "output tokens"),
    ],
)
def test_a_wrong_price_is_refused_by_name(make: Callable[[], Price], field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        make()


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ({"messages": []}, "messages"),
        ({"messages": "hello world"}, "messages"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"model": ""}, "model"),
        ({"messages": [*HELLO, {"content": "hi"}]}, r"messages\[1\]\.role"),
        ({"messages": [{"role": "user"}]}, r"messages\[0\]\.content"),
        ({"messages": [{"role": "assistant", "content": None}]}, r"messages\[0\]\.content"),
        ({"messages": ["hello world"]}, r"messages\[0\]: a str is not a message"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "what is this?"},
                            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                        ],
                    }
                ]
            },
            r"messages\[0\]\.content\[1\]: a 'image_url' part",
        ),
        ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, r"content\[0\]\.text"),
        ({"tools": "get_weather"}, "tools"),
        ({"tools": [{"type": "function", "function": {1, 2}}]}, "tools: not JSON"),
    ],
)
def test_bad_input_is_refused_naming_the_field(call: dict[str, object], field: str) -> None:
    arguments: dict[str, object] = {
        "messages": HELLO,
        "model": "gpt-4o",
        "max_tokens": 10,
        "price": Price(0, 0),
        **call,
    }
    with pytest.raises(ConfigurationError, match=field):
        estimate(**arguments)  # type: ignore[arg-type]


def test_a_retired_models_encoding_is_not_installed_and_says_so() -> None:
    with pytest.raises(ConfigurationError, match="model 'davinci': tiktoken encoding r50k_base"):
        encoding_for("davinci")


@pytest.fixture
def no_loaded_encodings() -> Iterator[None]:
    estimate_module._load.cache_clear()
    yield
    estimate_module._load.cache_clear()


@pytest.mark.usefixtures("no_loaded_encodings")
def test_without_the_installed_files_the_error_says_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(ConfigurationError) as refused:
        encoding_for("gpt-4o")
    message = str(refused.value)
    assert "model 'gpt-4o'" in message
    assert f"o200k_base.tiktoken is missing at {tmp_path}" in message
    assert PROVISION_COMMAND in message
