"""A model call's claim on the claims topic (``sagalog.budgets.claims``): written
before the call, read by the partition's next holder at assignment, so a call whose
instance died for good is counted by its successor, and the successor's repeat is a
claim of its own beside it.

The topic's two ends on the real broker are in tests/integration/test_model_budgets.py;
here, the record, the numbering, the window a reader keeps, and what ``model_call``
writes and counts.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from sagalog.agents.failures import BudgetWait, RetryableError
from sagalog.agents.state_store import StateStore
from sagalog.budgets.book import Spend
from sagalog.budgets.claims import ClaimNote, counts_at, merged, next_reservation
from sagalog.budgets.ledger import DAY_MS, MINUTE_MS, UNANSWERED_MS, Usage, held_from_ms

from .test_budgets_model_call import (
    KEY,
    MESSAGES,
    NOW_MS,
    ORIGIN,
    Crash,
    Model,
    _book,
    _call,
    _context,
    _reported,
)


def _claim(reservation: str, tokens: int = 40, at_ms: int = NOW_MS) -> Spend:
    return Spend("openai", reservation, at_ms, Usage(tokens=tokens))


# -- the pure parts ------------------------------------------------------------------


def test_a_repeat_is_numbered_after_every_earlier_claim_of_its_key() -> None:
    assert next_reservation("k", []) == "k"
    assert next_reservation("k", ["k"]) == "k#1"
    assert next_reservation("k", ["k", "k#1"]) == "k#2"
    # A gap (a claim released, or not read yet) never makes two claims one name.
    assert next_reservation("k", ["k", "k#2"]) == "k#3"
    assert next_reservation("k", ["k#1"]) == "k#2"
    # Another effect's claims, or a key that only starts the same, are not earlier.
    assert next_reservation("k", ["other", "kk#4", "other#9"]) == "k"


def test_a_reader_keeps_the_claims_some_window_may_still_hold() -> None:
    """From less than two minutes ago (tokens: a call with no answer yet), or from the
    start of the UTC day (money), whichever is earlier."""
    noon = 20_000 * DAY_MS + DAY_MS // 2
    assert held_from_ms(noon) == 20_000 * DAY_MS
    just_after_midnight = 20_000 * DAY_MS + MINUTE_MS
    assert held_from_ms(just_after_midnight) == just_after_midnight - UNANSWERED_MS + 1
    start = held_from_ms(noon)
    assert counts_at(_claim("today", at_ms=start), from_ms=start)
    assert not counts_at(_claim("yesterday", at_ms=start - 1), from_ms=start)


def test_a_settled_copy_of_a_claim_wins_over_its_estimate_from_either_side() -> None:
    estimate = _claim("k", tokens=90)
    settled = Spend("openai", "k", NOW_MS, Usage(90), Usage(30), NOW_MS + 800)
    assert merged(None, estimate) is estimate
    assert merged(estimate, settled) is settled
    assert merged(settled, estimate) is settled
    assert merged(estimate, _claim("k", tokens=90)) is estimate


def test_a_note_reads_back_as_written_and_a_foreign_record_is_skipped() -> None:
    note = ClaimNote("filings.events", 2, _claim(f"{KEY}#1"))
    assert ClaimNote.decode(note.encode()) == note
    assert note.key == f"{KEY}#1".encode()
    released = ClaimNote("filings.events", 2, _claim(KEY), released=True)
    assert ClaimNote.decode(released.encode()) == released
    for foreign in (b"", b"not json", b'{"v": 2, "claim": {}}', b"[1, 2]", b'{"v": 1}'):
        assert ClaimNote.decode(foreign) is None


def test_the_store_keeps_the_settled_copy_of_a_claim_read_twice(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    settled = Spend("openai", KEY, NOW_MS, Usage(90), Usage(30), NOW_MS + 800)
    store.keep_spend(ORIGIN.topic, ORIGIN.partition, settled)  # from the log
    store.keep_spend(ORIGIN.topic, ORIGIN.partition, _claim(KEY, 90))  # from the topic
    assert [s for _, s in store.spends()] == [settled]


# -- model_call, with the claims topic -------------------------------------------------


class ClaimsTopic:
    """The claims topic as the model sees it: each note in the order written, and
    whether the model had served anything when it was written."""

    def __init__(self, model: Model, *, fail: bool = False) -> None:
        self.model = model
        self.fail = fail
        self.notes: list[tuple[ClaimNote, int]] = []

    async def write(self, note: ClaimNote) -> None:
        if self.fail:
            raise RetryableError("the brokers did not acknowledge the claim")
        self.notes.append((note, len(self.model.served)))


def test_the_claim_is_written_before_the_call_and_not_again_on_its_answer(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db")
    model = Model()
    topic = ClaimsTopic(model)
    _call(_context(store, _book(store), write_claim=topic.write), model)
    ((note, served_before),) = topic.notes
    assert served_before == 0 and model.served == [KEY]
    assert (note.topic, note.partition) == (ORIGIN.topic, ORIGIN.partition)
    assert note.claim.reservation == KEY and note.claim.actual is None and not note.released


def test_a_claim_the_brokers_did_not_take_means_no_call_and_nothing_held(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db")
    book, model = _book(store), Model()
    with pytest.raises(RetryableError, match="did not acknowledge"):
        _call(_context(store, book, write_claim=ClaimsTopic(model, fail=True).write), model)
    assert model.served == []
    assert _reported(book.report(now_ms=NOW_MS)) == (0, 0)
    assert list(store.spends()) == []


def test_a_call_refused_by_the_model_writes_its_release(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    model = Model()
    model.refuse = True
    topic = ClaimsTopic(model)
    with contextlib.suppress(Exception):
        _call(_context(store, _book(store), write_claim=topic.write), model)
    assert [(n.claim.reservation, n.released) for n, _ in topic.notes] == [
        (KEY, False),
        (KEY, True),
    ]


def test_the_successor_of_an_instance_dead_during_a_call_counts_its_claim_and_its_own(
    tmp_path: Path,
) -> None:
    """Instance a dies during the call (the model served it) and never comes back; b
    takes the partition over with a's claim from the claims topic and no intent of its
    own. b's repeat is ``<key>#1``: both count until their windows pass, and both go to
    the log with b's answer."""
    model = Model(crash_once=True)
    a = StateStore(tmp_path / "a")
    topic = ClaimsTopic(model)
    with contextlib.suppress(Crash):
        _call(_context(a, _book(a), write_claim=topic.write), model)
    ((written, _),) = topic.notes
    b = StateStore(tmp_path / "b")
    b.keep_spend(written.topic, written.partition, written.claim)  # read at assignment
    book = _book(b)

    ctx = _context(b, book, write_claim=topic.write)
    _call(ctx, model)

    assert model.served == [KEY, KEY]
    assert [n.claim.reservation for n, _ in topic.notes] == [KEY, f"{KEY}#1"]
    settled, reserved = _reported(book.report(now_ms=NOW_MS))
    assert reserved == written.claim.estimate.tokens  # a's call: its estimate stands
    assert settled > 0  # b's call: what the model reported
    (recorded,) = ctx.recorded
    assert {s.reservation for s in recorded.spends or []} == {KEY, f"{KEY}#1"}


def test_a_call_deferred_before_it_was_sent_holds_no_claim(tmp_path: Path) -> None:
    """A breaker or a rate limit that stops the call after its reservation: nothing was
    sent, so the claim is given back, and the call's next try is not a repeat."""
    store = StateStore(tmp_path / "db")
    book, model = _book(store), Model()
    ctx = _context(store, book)

    async def refused_slot(dependency: str, *, key: str) -> None:
        raise BudgetWait("model", "no slot", retry_at=0.0)

    ctx.flow.admit = refused_slot  # type: ignore[method-assign]
    with pytest.raises(BudgetWait):
        asyncio.run(
            ctx.model_call(
                "openai", model.chat, model="gpt-4o-mini", messages=MESSAGES, max_tokens=50
            )
        )
    assert model.served == [] and list(store.spends()) == []
    assert _reported(book.report(now_ms=NOW_MS)) == (0, 0)
    _call(_context(store, book), model)
    assert model.served == [KEY]
    assert [s.reservation for _, s in store.spends()] == [KEY]
