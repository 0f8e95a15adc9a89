"""What a model call may cost at most, known before it is made: the size of its reservation.

A budget counts a call when it is reserved, before the model answers (``ledger``),
so the estimate must exist before the call and must not be low: a low estimate
lets concurrent calls through that the settlements then show were over the limit.
So the prompt is counted as the model will count it, with tiktoken and the framing
OpenAI documents for chat messages, and the answer is assumed to use all of
``max_tokens``; settling to the reported usage gives the difference back.

Where the count cannot be exact it errs high (tool definitions counted as their
JSON, which is longer than the form the model sees) or refuses (a part that is not
text, such as an image, whose cost tiktoken cannot tell). Money rounds up to the
next micro for the same reason.

Pure apart from loading an encoding, once per process: tiktoken's files come from
the cache ``tokenizer_files`` installs, never from the network.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

import tiktoken

from sagalog.budgets import tokenizer_files
from sagalog.budgets.ledger import Usage, money_micros
from sagalog.errors import ConfigurationError

#: The framing of each message (``<|start|>{role}<|message|>...<|end|>``), as OpenAI
#: documents it for its chat models since gpt-3.5-turbo-0613.
TOKENS_PER_MESSAGE = 3
#: A message's ``name`` costs its own tokens and one more.
TOKENS_PER_NAME = 1
#: The answer is primed with ``<|start|>assistant<|message|>``.
REPLY_PRIMING = 3
#: For a model tiktoken does not know (an OpenAI-compatible server's own name): the
#: encoding of OpenAI's current models.
FALLBACK_ENCODING = "o200k_base"
_PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """What a model charges, in micros (millionths of the currency unit) per million
    tokens, read and written, as the price lists state it."""

    input_micros_per_million: int
    output_micros_per_million: int

    def __post_init__(self) -> None:
        for name in ("input_micros_per_million", "output_micros_per_million"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(
                    f"price {name}={value!r}: give a whole, non-negative number of micros "
                    "per million tokens, or use Price.per_million(input=..., output=...) "
                    'with amounts such as "2.50"'
                )

    @classmethod
    def per_million(cls, *, input: str | int | Decimal, output: str | int | Decimal) -> Price:
        """A price as the price lists write it ("2.50" per million input tokens)."""
        return cls(
            money_micros(input, what="price per million input tokens"),
            money_micros(output, what="price per million output tokens"),
        )

    def cost_micros(self, *, input_tokens: int, output_tokens: int) -> int:
        """The cost of that many tokens, rounded up to the next micro once, on the
        exact sum: rounding down could let the call that tips a budget over through."""
        exact = (
            input_tokens * self.input_micros_per_million
            + output_tokens * self.output_micros_per_million
        )
        return -(-exact // _PER_MILLION)


@dataclass(frozen=True)
class Estimate(Usage):
    """The most a call may use: its prompt, plus every token of ``max_tokens``.

    A ``Usage``, so it is what ``Ledger.reserve`` takes.
    """


def estimate(
    messages: Sequence[Mapping[str, object]],
    *,
    model: str,
    max_tokens: int,
    price: Price,
    tools: Sequence[Mapping[str, object]] | None = None,
) -> Estimate:
    """The tokens and money to reserve for one chat call.

    Raises:
        ConfigurationError: a field of the call is missing or wrong (named), or the
            model's encoding is not installed (the message says what to run).
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigurationError(
            f"max_tokens={max_tokens!r}: give the most tokens the answer may have (1 or "
            "more); without it a call has no upper bound to reserve"
        )
    prompt = prompt_tokens(messages, model, tools=tools)
    return Estimate(
        tokens=prompt + max_tokens,
        micros=price.cost_micros(input_tokens=prompt, output_tokens=max_tokens),
    )


def prompt_tokens(
    messages: Sequence[Mapping[str, object]],
    model: str,
    *,
    tools: Sequence[Mapping[str, object]] | None = None,
) -> int:
    """The prompt tokens of an OpenAI-style chat call: each message with its framing,
    the priming of the answer, and the tool (or function) definitions, if any.

    Raises:
        ConfigurationError: as ``estimate``.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise ConfigurationError(
            "messages: give a non-empty list of messages, each a mapping with 'role' and 'content'"
        )
    encoding = encoding_for(model)
    tokens = REPLY_PRIMING
    for index, message in enumerate(messages):
        tokens += _message_tokens(encoding, f"messages[{index}]", message)
    if tools is not None:
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise ConfigurationError("tools: give a list of tool definitions, as the API takes")
        if tools:
            tokens += _count(encoding, _as_json("tools", tools))
    return tokens


def encoding_for(model: str) -> tiktoken.Encoding:
    """The encoding ``model`` counts with (``FALLBACK_ENCODING`` if tiktoken does not
    know the name), loaded from the installed files.

    Raises:
        ConfigurationError: no model named, or its encoding's files are not installed.
    """
    if not isinstance(model, str) or not model:
        raise ConfigurationError(f"model={model!r}: name the model the call goes to")
    try:
        name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        name = FALLBACK_ENCODING
    try:
        return _load(name)
    except ConfigurationError as error:
        raise ConfigurationError(f"model {model!r}: {error}") from error


@functools.cache
def _load(encoding: str) -> tiktoken.Encoding:
    """Loaded once per process: building an encoding parses its whole file (a quarter
    of a second for o200k_base). A failure is not cached, so installing the files
    mends a running process."""
    tokenizer_files.check_installed(encoding)
    return tiktoken.get_encoding(encoding)


def _message_tokens(encoding: tiktoken.Encoding, where: str, message: object) -> int:
    """One message: its framing, and every field's value (the role included), as the
    model reads them."""
    if not isinstance(message, Mapping):
        raise ConfigurationError(
            f"{where}: a {type(message).__name__} is not a message; give a mapping with "
            "'role' and 'content'"
        )
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise ConfigurationError(
            f"{where}.role: missing; every message needs one (system, user, assistant, tool)"
        )
    calls_a_tool = bool(message.get("tool_calls") or message.get("function_call"))
    if "content" not in message or (message["content"] is None and not calls_a_tool):
        raise ConfigurationError(
            f"{where}.content: missing; only an assistant message calling a tool may have none"
        )
    tokens = TOKENS_PER_MESSAGE
    for key, value in message.items():
        field = f"{where}.{key}"
        if key == "content" and isinstance(value, list):
            tokens += sum(
                _count(encoding, _part_text(f"{field}[{i}]", part)) for i, part in enumerate(value)
            )
        elif isinstance(value, str):
            tokens += _count(encoding, value)
        elif value is not None:
            tokens += _count(encoding, _as_json(field, value))  # tool_calls, function_call
        if key == "name":
            tokens += TOKENS_PER_NAME
    return tokens


def _part_text(where: str, part: object) -> str:
    """A content part's text; any other kind (an image, audio, a file) is refused, not
    guessed: its cost is not a matter of tokenizing."""
    if isinstance(part, Mapping) and part.get("type") == "text":
        text = part.get("text")
        if isinstance(text, str):
            return text
        raise ConfigurationError(f"{where}.text: missing; a text part needs its text")
    kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
    raise ConfigurationError(
        f"{where}: a {kind!r} part cannot be estimated from its tokens; only text parts "
        "can be budgeted"
    )


def _as_json(where: str, value: object) -> str:
    """Compact, with non-ASCII kept as is: escapes would count several tokens per
    character."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise ConfigurationError(f"{where}: not JSON ({error}); give what the API takes") from error


def _count(encoding: tiktoken.Encoding, text: str) -> int:
    """Special-token markers in the text (``<|endoftext|>``) count as the plain text
    they are: the API does not let a message inject them."""
    return len(encoding.encode_ordinary(text))
