"""An LLM agent loop inside a handler: the model asks for tools, the handler calls them,
until the model answers.

    answer = await run_tool_loop(
        ctx, "openai", model.chat,
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Prepare filing F-2026-0042."}],
        tools=[Tool("fetch_document", "The filed document's text.", SCHEMA, documents.fetch)],
        max_tokens=400,
    )

Each model turn is a ``ctx.model_call`` (reserved in the budget, settled to the usage,
recorded) and each tool call a ``ctx.effect`` named ``tool.<name>`` (intent before
the call, idempotency key, recorded result). Keys count per effect name within the
handled event, so a retried or redelivered event walks the same conversation: every
turn and every tool call it made before comes back from the record, and the loop
goes on from the first one it had not made. A crash in the middle of a loop costs
the calls that were out, never the whole loop again.

The model's tool requests are input from outside: a tool it was not given, arguments
that are not a JSON object or miss a required one, or a loop that does not end in
``max_turns`` fail the step (``ToolLoopError``) rather than being guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagalog.agents.failures import NonRetryableError
from sagalog.agents.lineage import DecisionLineage

if TYPE_CHECKING:
    from sagalog.agents.context import HandlerContext


class ToolLoopError(NonRetryableError):
    """The model asked for something the loop cannot do: a tool it was not given, bad
    arguments, or no answer within ``max_turns``. The message names it."""


@dataclass(frozen=True)
class Tool:
    """A function the model may call.

    Attributes:
        name: what the model calls it; also the effect's name, ``tool.<name>``.
        description: what it does, for the model.
        parameters: its arguments as a JSON schema (``{"type": "object", ...}``).
        call: ``call(**arguments, idempotency_key=key)``, sync or async, reaching the
            system the tool stands for.
        dependency: its circuit breaker's and rate limit's name (default: ``name``).
        lookup: as ``ctx.effect``'s: finds the result of an earlier call by its key.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    call: Callable[..., Any]
    dependency: str | None = None
    lookup: Callable[..., Any] | None = None

    def spec(self) -> dict[str, Any]:
        """The tool as an OpenAI-compatible request lists it."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for, and what it returned."""

    name: str
    arguments: dict[str, Any]
    result: Any


@dataclass(frozen=True)
class LoopResult:
    """How the loop ended.

    Attributes:
        answer: the model's final message's text.
        messages: the whole conversation, the model's and the tools' turns included.
        calls: every tool call, in order.
        turns: the model calls made (one more than the rounds of tool calls).
        lineage: which model decided, with which parameters, on what prompt, from
            which inputs: the triggering event and each tool result (by its hash).
    """

    answer: str
    messages: list[dict[str, Any]]
    calls: list[ToolCall]
    turns: int
    lineage: DecisionLineage


async def run_tool_loop(
    ctx: HandlerContext,
    budget: str,
    chat: Callable[..., Any],
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Tool],
    max_tokens: int,
    max_turns: int = 8,
    template: str | None = None,
    stream: bool = False,
    **parameters: Any,
) -> LoopResult:
    """Ask ``model`` with ``tools`` until it answers; see the module's docstring.

    ``chat`` is what ``ctx.model_call`` calls (``ChatModel.chat``); ``parameters`` go
    with every request (``temperature``). ``template`` is the prompt's fixed
    instructions, hashed into the lineage. With ``stream``, each turn is a
    ``ctx.model_stream``: the answer's text goes to the workflow's stream as the model
    writes it (``sagalog.streams``).

    Raises:
        ToolLoopError: an unknown tool, bad arguments, or no answer in ``max_turns``.
        Whatever ``ctx.model_call`` and the tools raise (a budget's wait or refusal
        included), with the runtime's retry rules.
    """
    by_name = {tool.name: tool for tool in tools}
    specs = [tool.spec() for tool in tools]
    conversation = [dict(message) for message in messages]
    calls: list[ToolCall] = []
    used_model = model
    for turn in range(1, max_turns + 1):
        request: dict[str, Any] = {
            "model": model,
            "messages": conversation,
            "max_tokens": max_tokens,
            "tools": specs,
            **parameters,
        }
        if stream:
            answer = await ctx.model_stream(budget, chat, **request).result()
        else:
            answer = await ctx.model_call(budget, chat, **request)
        used_model = str(answer.get("model") or model)
        message = _message_of(answer)
        requested = message.get("tool_calls") or []
        conversation.append(
            {"role": "assistant", "content": message.get("content"), "tool_calls": requested}
            if requested
            else {"role": "assistant", "content": message.get("content")}
        )
        if not requested:
            return LoopResult(
                answer=str(message.get("content") or ""),
                messages=conversation,
                calls=calls,
                turns=turn,
                lineage=_lineage(ctx, used_model, messages, calls, template, max_tokens, by_name),
            )
        for request in requested:
            tool, arguments = _requested(request, by_name)
            result = await ctx.effect(
                f"tool.{tool.name}",
                tool.call,
                dependency=tool.dependency or tool.name,
                lookup=tool.lookup,
                **arguments,
            )
            calls.append(ToolCall(tool.name, arguments, result))
            conversation.append(
                {
                    "role": "tool",
                    "tool_call_id": request.get("id", ""),
                    "content": json.dumps(result, sort_keys=True, default=str),
                }
            )
    raise ToolLoopError(
        f"workflow {ctx.workflow_id}: the model asked for tools {max_turns} turns running "
        f"without answering (last: {', '.join(c.name for c in calls[-3:])}); raise "
        "max_turns if the task needs more, or tell the model when to stop"
    )


def _message_of(answer: Mapping[str, Any]) -> dict[str, Any]:
    try:
        message = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ToolLoopError(f"the model's answer has no message: {str(answer)[:300]}") from exc
    if not isinstance(message, dict):
        raise ToolLoopError(f"the model's message is not an object: {message!r:.300}")
    return message


def _requested(request: Any, tools: Mapping[str, Tool]) -> tuple[Tool, dict[str, Any]]:
    """The tool a request names and its arguments, checked against its schema's
    required names."""
    function = request.get("function") if isinstance(request, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    tool = tools.get(str(name))
    if tool is None or function is None:
        raise ToolLoopError(
            f"the model asked for tool {name!r}, which it was not given (given: "
            f"{', '.join(sorted(tools)) or 'none'})"
        )
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except json.JSONDecodeError as exc:
        raise ToolLoopError(f"tool {tool.name}: arguments are not JSON ({exc})") from exc
    if not isinstance(arguments, dict):
        raise ToolLoopError(f"tool {tool.name}: arguments are not an object: {arguments!r:.200}")
    missing = [n for n in tool.parameters.get("required") or () if n not in arguments]
    if missing:
        raise ToolLoopError(f"tool {tool.name}: the model left out {', '.join(missing)}")
    return tool, arguments


def _lineage(
    ctx: HandlerContext,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    calls: list[ToolCall],
    template: str | None,
    max_tokens: int,
    tools: Mapping[str, Tool],
) -> DecisionLineage:
    inputs = {
        f"tool:{n}:{call.name}": json.dumps(call.result, sort_keys=True, default=str)
        for n, call in enumerate(calls)
    }
    return ctx.decision(
        model_id=model,
        prompt=json.dumps(list(messages), sort_keys=True, default=str),
        input_refs=[ctx.event_id, *inputs],
        parameters={"max_tokens": max_tokens, "tools": sorted(tools)},
        template=template,
        inputs=inputs,
    )
