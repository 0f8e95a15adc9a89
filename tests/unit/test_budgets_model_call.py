"""``ctx.model_call``: reserve before the call, settle to the reported usage, never
count one call twice, and do what the flow says when the budget has no room; the
book's share of a budget and the claims it folds (``sagalog.budgets.book``)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from sagalog.agents.context import HandlerContext, idempotency_key, reported_usage
from sagalog.agents.declaration import Agent
from sagalog.agents.failures import BudgetRefused, BudgetWait, NonRetryableError
from sagalog.agents.state_store import StateStore
from sagalog.budgets.book import BudgetBook, Spend, claim_of, logged_claim
from sagalog.budgets.declaration import Budget
from sagalog.budgets.estimate import Price, estimate
from sagalog.budgets.ledger import BudgetExceeded, BudgetLimits, Granted, Usage
from sagalog.errors import ConfigurationError
from sagalog.flows.model import BUDGET_REFUSED
from sagalog.position import RecordPosition

from .fakes import drafting_context
from .timing import VirtualTimeLoop, run_virtual

NOW = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)
NOW_MS = int(NOW.timestamp() * 1000)
ORIGIN = RecordPosition("filings.events", 1, 40)
MESSAGES = [{"role": "user", "content": "Summarise the filing in one sentence."}]
PRICE = Price.per_million(input="2.50", output="10.00")
KEY = idempotency_key(agent="drafter", event_id="e1", effect="model.openai", occurrence=0)


class Crash(BaseException):
    """The process dying inside the call."""


class Model:
    """A model that counts what it serves, and reports usage as OpenAI does."""

    def __init__(self, *, completion: int = 7, crash_once: bool = False) -> None:
        self.served: list[str] = []
        self.completion = completion
        self.crash_once = crash_once
        self.refuse = False

    def chat(self, **request: Any) -> dict[str, Any]:
        if self.refuse:
            raise NonRetryableError("400: the model refused the request")
        self.served.append(request["idempotency_key"])
        prompt = (
            estimate(request["messages"], model=request["model"], max_tokens=1, price=PRICE).tokens
            - 1
        )
        if self.crash_once:
            self.crash_once = False
            raise Crash
        return {
            "choices": [{"message": {"role": "assistant", "content": "A filing."}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": self.completion},
        }


def _book(store: StateStore, *, tokens_per_minute: int = 10_000) -> BudgetBook:
    budget = Budget.of("openai", tokens_per_minute=tokens_per_minute, price=PRICE)
    return BudgetBook({"openai": budget}, store.spends)


def _context(
    store: StateStore,
    book: BudgetBook,
    *,
    policy: str = "wait",
    event_id: str = "e1",
    **more: Any,
) -> HandlerContext:
    return drafting_context(
        store, book, now=NOW, event_id=event_id, on_budget_exhausted=policy, **more
    )


def _call(ctx: HandlerContext, model: Model, *, max_tokens: int = 50) -> Any:
    return asyncio.run(
        ctx.model_call(
            "openai", model.chat, model="gpt-4o-mini", messages=MESSAGES, max_tokens=max_tokens
        )
    )


def _reported(ledger_report: list[Any]) -> tuple[int, int]:
    (only,) = ledger_report
    return only.settled.tokens, only.reserved.tokens


def test_a_call_reserves_its_estimate_and_settles_to_the_reported_usage(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    book, model = _book(store), Model(completion=7)
    ctx = _context(store, book)
    guess = estimate(MESSAGES, model="gpt-4o-mini", max_tokens=50, price=PRICE)

    answer = _call(ctx, model)

    used = reported_usage(answer, PRICE)
    assert used is not None and used.tokens < guess.tokens  # 7 of the 50 reserved
    assert model.served == [KEY]
    assert _reported(book.report(now_ms=NOW_MS)) == (used.tokens, 0)
    (recorded,) = ctx.recorded
    (logged,) = recorded.spends or []
    assert (logged.ledger, logged.reservation) == ("openai", KEY)
    assert (logged.estimate_tokens, logged.tokens) == (guess.tokens, used.tokens)
    assert logged.cost_micros == used.micros > 0
    # What the log carries is what the store keeps, and what another instance folds.
    ((partition, kept),) = store.spends()
    assert partition == ORIGIN.partition and claim_of(logged) == kept


def test_a_redelivered_event_gets_the_recorded_answer_and_counts_nothing(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    book, model = _book(store), Model()
    first = _call(_context(store, book), model)
    before = book.report(now_ms=NOW_MS)

    again = _call(_context(store, book), model)

    assert again == first and model.served == [KEY]
    assert book.report(now_ms=NOW_MS) == before


def test_a_call_repeated_after_a_crash_is_a_second_spend_counted_once(tmp_path: Path) -> None:
    """The model served the first call, whose answer died with the process: the repeat
    is served again, so both count; neither counts twice across further restarts."""
    store = StateStore(tmp_path / "db")
    model = Model(crash_once=True)
    with contextlib.suppress(Crash):
        _call(_context(store, _book(store)), model)
    store.close()
    store = StateStore(tmp_path / "db")  # the restarted process
    book = _book(store)
    ctx = _context(store, book)

    _call(ctx, model)

    assert model.served == [KEY, KEY]
    claims = {s.reservation: s for _, s in store.spends()}
    assert set(claims) == {KEY, f"{KEY}#1"}
    assert claims[KEY].actual is None  # its usage was never reported: the estimate stands
    assert claims[f"{KEY}#1"].actual is not None
    settled, reserved = _reported(book.report(now_ms=NOW_MS))
    assert reserved == claims[KEY].estimate.tokens
    assert settled == claims[f"{KEY}#1"].counted.tokens
    (recorded,) = ctx.recorded
    assert {s.reservation for s in recorded.spends or []} == {KEY, f"{KEY}#1"}


def test_no_room_waits_until_the_window_has_room_when_the_flow_says_wait(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    guess = estimate(MESSAGES, model="gpt-4o-mini", max_tokens=50, price=PRICE).tokens
    book, model = _book(store, tokens_per_minute=guess + 5), Model(completion=50)
    _call(_context(store, book, event_id="e0"), model)

    with pytest.raises(BudgetWait) as waited:
        _call(_context(store, book, event_id="e1"), model)

    assert waited.value.retry_at == pytest.approx(100.0 + 60.0)  # when e0 leaves the window
    assert "budget 'openai' is exhausted" in str(waited.value)
    assert len(model.served) == 1
    assert not any(s.reservation == KEY for _, s in store.spends())


def test_no_room_fails_the_step_when_the_flow_says_fail(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    guess = estimate(MESSAGES, model="gpt-4o-mini", max_tokens=50, price=PRICE).tokens
    book, model = _book(store, tokens_per_minute=guess + 5), Model(completion=50)
    _call(_context(store, book, event_id="e0"), model)

    with pytest.raises(BudgetRefused, match="on_budget_exhausted: fail for step 'draft'"):
        _call(_context(store, book, policy="fail"), model)
    assert len(model.served) == 1


def test_no_room_fails_the_step_for_its_gate_and_an_approved_rerun_goes_over(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db")
    guess = estimate(MESSAGES, model="gpt-4o-mini", max_tokens=50, price=PRICE).tokens
    book, model = _book(store, tokens_per_minute=guess + 5), Model(completion=50)
    _call(_context(store, book, event_id="e0"), model)

    with pytest.raises(BudgetRefused, match="its gate draft_budget decides") as refused:
        _call(_context(store, book, policy="gate"), model)
    assert refused.value.gated and type(refused.value).__name__ == BUDGET_REFUSED
    assert len(model.served) == 1

    # Approved: the step runs again on e1 (its keys), over the budget, counted.
    rerun = _context(
        store, book, policy="gate", event_id="retry-1", over_budget=True, rerun_of="e1"
    )
    _call(rerun, model)
    assert model.served[1] == KEY  # the key of e1's call, as the refused run made it
    settled, reserved = _reported(book.report(now_ms=NOW_MS))
    assert settled > guess + 5 and reserved == 0  # over the limit, and held in the window
    with pytest.raises(BudgetRefused):  # a run not approved still finds no room
        _call(_context(store, book, policy="gate", event_id="e2"), model)


def test_a_call_that_could_never_fit_or_names_no_budget_is_not_retried(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    book, model = _book(store, tokens_per_minute=10), Model()
    with pytest.raises(NonRetryableError, match="can never fit 10 tokens per minute"):
        _call(_context(store, book), model)
    ctx = _context(store, book)
    with pytest.raises(NonRetryableError, match="budget 'other', which it does not declare"):
        asyncio.run(ctx.model_call("other", model.chat, model="m", messages=MESSAGES, max_tokens=5))
    with pytest.raises(NonRetryableError, match="max_tokens=0"):
        _call(_context(store, book, event_id="e2"), model, max_tokens=0)
    assert model.served == []


def test_a_call_that_could_never_fit_is_refused_as_the_flow_says_and_a_gate_may_let_it(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db")
    book, model = _book(store, tokens_per_minute=10), Model()
    with pytest.raises(BudgetRefused, match="can never fit 10 tokens per minute") as failed:
        _call(_context(store, book, policy="fail"), model)
    assert not failed.value.gated
    with pytest.raises(BudgetRefused, match="its gate draft_budget decides") as gated:
        _call(_context(store, book, policy="gate"), model)
    assert gated.value.gated and model.served == []
    approved = _context(store, book, policy="gate", event_id="r", over_budget=True, rerun_of="e1")
    _call(approved, model)
    assert model.served == [KEY]


def test_a_call_the_model_refuses_gives_its_reservation_back(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    book, model = _book(store), Model()
    model.refuse = True
    with pytest.raises(NonRetryableError):
        _call(_context(store, book), model)
    assert _reported(book.report(now_ms=NOW_MS)) == (0, 0)
    assert list(store.spends()) == []


def _claim(key: str, tokens: int, at_ms: int = NOW_MS, ledger: str = "openai") -> Spend:
    return Spend(ledger, key, at_ms, Usage(tokens=tokens))


def test_each_partition_holds_its_part_of_the_budget_whoever_holds_it() -> None:
    """900 tokens a minute over 3 partitions: 300 each. The claims of a partition come
    with it to its next holder, and an instance that held every partition and spent
    on one of them cannot lend the others' parts to it."""
    kept = {0: [_claim("a", 300)], 1: [_claim("b", 200)]}

    def load(held: frozenset[int] | None) -> list[tuple[int, Spend]]:
        return [(p, s) for p, claims in kept.items() if held is None or p in held for s in claims]

    book = BudgetBook({"openai": Budget.of("openai", tokens_per_minute=900)}, load)
    book.rebalance([0, 1, 2], total=3)
    (report,) = book.report(now_ms=NOW_MS)
    assert report.limits == BudgetLimits(tokens_per_minute=900)
    assert (report.reserved.tokens, report.calls) == (500, 2)
    assert not isinstance(book.reserve(_claim("c", 1), 0, now_ms=NOW_MS + 1), Granted)
    assert isinstance(book.reserve(_claim("c", 100), 1, now_ms=NOW_MS + 1), Granted)
    assert isinstance(book.reserve(_claim("d", 300), 2, now_ms=NOW_MS + 1), Granted)
    with pytest.raises(BudgetExceeded, match="can never fit 300 tokens per minute"):
        book.reserve(_claim("e", 301), 2, now_ms=NOW_MS + 1)

    book.rebalance([1], total=3)  # partitions 0 and 2 went to other instances
    (report,) = book.report(now_ms=NOW_MS + 2)
    assert report.limits == BudgetLimits(tokens_per_minute=300)
    assert report.reserved.tokens == 200  # partition 0's claim went with it


def test_claims_of_undeclared_budgets_and_old_claims_are_not_counted() -> None:
    claims = [
        (0, _claim("gone", 5, ledger="retired/x")),
        (0, _claim("old", 5, at_ms=NOW_MS - 2 * 86_400_000)),
        (1, _claim("a", 7, ledger="openai/acme")),
    ]
    budget = Budget.of("openai", tokens_per_minute=100, key=lambda ctx: "acme")
    book = BudgetBook({"openai": budget}, lambda held: claims)
    book.rebalance([0, 1], total=2)
    assert [(r.ledger, r.reserved.tokens) for r in book.report(now_ms=NOW_MS)] == [
        ("openai", 0),
        ("openai/acme", 7),
    ]


def test_a_logged_claim_reads_back_as_it_was_kept() -> None:
    pending = _claim("k", 40)
    settled = Spend("openai/acme", "k#1", NOW_MS, Usage(40, 300), Usage(12, 90))
    assert claim_of(logged_claim(pending)) == pending
    assert claim_of(logged_claim(settled)) == settled


def test_a_budget_is_declared_with_a_limit_and_a_price_for_money() -> None:
    with pytest.raises(ConfigurationError, match="limits nothing"):
        Budget.of("openai")
    with pytest.raises(ConfigurationError, match="gives no price"):
        Budget.of("openai", money_per_day="25.00")
    with pytest.raises(ConfigurationError, match="lowercase"):
        Budget.of("Open AI", tokens_per_minute=5)
    keyed = Budget.of("openai", tokens_per_minute=5, key=lambda ctx: ctx)
    assert keyed.ledger_key("acme") == "openai/acme"
    with pytest.raises(ConfigurationError, match="non-empty text without '/'"):
        keyed.ledger_key("a/b")
    with pytest.raises(ConfigurationError, match="declares budget 'openai' twice"):
        Agent("drafter", budgets=[keyed, keyed])


def test_a_window_with_room_within_the_rate_wait_is_waited_for_in_place(tmp_path: Path) -> None:
    """A refill a moment away is waited for, as a rate-limit slot is (deferring through
    the retry topic costs a round trip per refill); one further off is deferred."""
    store = StateStore(tmp_path / "db")
    guess = estimate(MESSAGES, model="gpt-4o-mini", max_tokens=50, price=PRICE).tokens
    book, model = _book(store, tokens_per_minute=guess + 5), Model(completion=50)
    served_at: list[float] = []

    async def attempt(loop: VirtualTimeLoop) -> None:
        def now() -> dt.datetime:
            return NOW + dt.timedelta(seconds=loop.time())

        async def chat(**request: Any) -> dict[str, Any]:  # async: no thread, virtual time
            served_at.append(loop.time())
            return model.chat(**request)

        first = _context(store, book, event_id="e0", clock=now)
        await first.model_call("openai", chat, model="gpt-4o-mini", messages=MESSAGES,
                               max_tokens=50)  # fmt: skip
        # e0 leaves the window 60 s after its answer: 0.5 s from here is within the
        # rate wait (1 s), 30 s is not.
        loop_at = loop.time()
        await asyncio.sleep(59.5)
        await _context(store, book, event_id="e1", clock=now).model_call(
            "openai", chat, model="gpt-4o-mini", messages=MESSAGES, max_tokens=50
        )
        assert served_at[-1] == pytest.approx(loop_at + 60.0)
        with pytest.raises(BudgetWait):
            await _context(store, book, event_id="e2", clock=now).model_call(
                "openai", chat, model="gpt-4o-mini", messages=MESSAGES, max_tokens=50
            )

    run_virtual(attempt)
    assert len(served_at) == 2
