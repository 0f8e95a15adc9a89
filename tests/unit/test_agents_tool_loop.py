"""The agent loop (``sagalog.agents.tool_loop``): model turns under the budget, tool
calls as effects, and a redelivered event that walks the same conversation from the
record. The model is the stand-in's own answering rule (``standins.model.complete``),
which asks for each tool it was given once, in order, then answers."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from sagalog.agents.context import HandlerContext
from sagalog.agents.state_store import StateStore
from sagalog.agents.tool_loop import Tool, ToolLoopError, run_tool_loop
from sagalog.budgets.book import BudgetBook
from sagalog.budgets.declaration import Budget
from standins.model import complete

from .fakes import drafting_context

NOW = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)
ASK = [{"role": "user", "content": "Prepare filing F-2026-0042 for ESMA."}]
DOCUMENT = {
    "type": "object",
    "properties": {"filing_number": {"type": "string"}},
    "required": ["filing_number"],
}
RULES = {"type": "object", "properties": {"regulator": {"type": "string"}}, "required": []}


class Model:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def chat(self, *, idempotency_key: str, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        return complete(request)


class Systems:
    """The tools' systems: each counts its calls and the keys it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def fetch_document(self, *, filing_number: str, idempotency_key: str) -> dict[str, str]:
        self.calls.append(("fetch_document", idempotency_key))
        return {"filing_number": filing_number, "text": "Annual report, 12 pages."}

    async def find_rules(self, *, idempotency_key: str, **_: Any) -> list[str]:
        self.calls.append(("find_rules", idempotency_key))
        return ["MiFID II art. 16", "ESMA/2026/7"]

    def tools(self) -> list[Tool]:
        return [
            Tool("fetch_document", "The filed document's text.", DOCUMENT, self.fetch_document),
            Tool("find_rules", "The rules a filing falls under.", RULES, self.find_rules),
        ]


def _context(store: StateStore, book: BudgetBook) -> HandlerContext:
    return drafting_context(store, book, now=NOW)


def _loop(ctx: HandlerContext, model: Model, tools: list[Tool], **options: Any) -> Any:
    return asyncio.run(
        run_tool_loop(
            ctx, "model", model.chat, model="gpt-4o-mini", messages=ASK, tools=tools,
            max_tokens=60, **options,
        )
    )  # fmt: skip


def _book(store: StateStore) -> BudgetBook:
    return BudgetBook({"model": Budget.of("model", tokens_per_minute=50_000)}, store.spends)


def test_the_model_calls_each_tool_as_an_effect_then_answers(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    model, systems = Model(), Systems()
    ctx = _context(store, _book(store))

    result = _loop(ctx, model, systems.tools())

    assert [name for name, _ in systems.calls] == ["fetch_document", "find_rules"]
    assert [c.name for c in result.calls] == ["fetch_document", "find_rules"]
    assert result.calls[1].result == ["MiFID II art. 16", "ESMA/2026/7"]
    assert result.turns == 3 and "using fetch_document, find_rules" in result.answer
    roles = [m["role"] for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    # Every request offered the tools; the last one carried both tools' answers.
    assert all(len(r["tools"]) == 2 for r in model.requests)
    assert sum(m["role"] == "tool" for m in model.requests[-1]["messages"]) == 2
    # Three model calls, each a claim on the budget; two tool effects; all recorded.
    effects = [e.effect for e in ctx.recorded]
    assert effects == ["model.model", "tool.fetch_document", "model.model", "tool.find_rules",
                       "model.model"]  # fmt: skip
    assert len({e.idempotency_key for e in ctx.recorded}) == 5
    assert sum(len(e.spends or []) for e in ctx.recorded) == 3
    # The lineage names the event and each tool result, by hash.
    assert result.lineage.input_refs == ["e1", "tool:0:fetch_document", "tool:1:find_rules"]
    assert set(result.lineage.input_hashes) == {"tool:0:fetch_document", "tool:1:find_rules"}
    assert result.lineage.parameters["tools"] == '["fetch_document","find_rules"]'


def test_a_redelivered_event_walks_the_same_conversation_from_the_record(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    book = _book(store)
    model, systems = Model(), Systems()
    first = _loop(_context(store, book), model, systems.tools())
    asked, called = len(model.requests), len(systems.calls)
    spent = book.report(now_ms=int(NOW.timestamp() * 1000))

    again = _loop(_context(store, book), model, systems.tools())

    assert (len(model.requests), len(systems.calls)) == (asked, called)  # nothing called
    assert again.answer == first.answer and again.messages == first.messages
    assert book.report(now_ms=int(NOW.timestamp() * 1000)) == spent


def test_a_tool_the_model_was_not_given_fails_the_step(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    systems = Systems()

    def chat(**request: Any) -> dict[str, Any]:
        answer = complete({**request, "tools": [Tool("delete_all", "", {}, print).spec()]})
        return answer

    with pytest.raises(ToolLoopError, match="tool 'delete_all', which it was not given"):
        asyncio.run(
            run_tool_loop(
                _context(store, _book(store)), "model", chat, model="m", messages=ASK,
                tools=systems.tools(), max_tokens=60,
            )
        )  # fmt: skip
    assert systems.calls == []


def test_a_loop_that_does_not_end_in_max_turns_fails_the_step(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    with pytest.raises(ToolLoopError, match="2 turns running without answering"):
        _loop(_context(store, _book(store)), Model(), Systems().tools(), max_turns=2)


def test_arguments_missing_a_required_name_fail_the_step(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    systems = Systems()
    strict = {**DOCUMENT, "required": ["filing_number", "year"]}
    loose = Tool("fetch_document", "", DOCUMENT, systems.fetch_document)

    def chat(**request: Any) -> dict[str, Any]:
        return complete({**request, "tools": [loose.spec()]})

    tool = Tool("fetch_document", "", strict, systems.fetch_document)
    with pytest.raises(ToolLoopError, match="the model left out year"):
        asyncio.run(
            run_tool_loop(
                _context(store, _book(store)), "model", chat, model="m", messages=ASK,
                tools=[tool], max_tokens=60,
            )
        )  # fmt: skip
