"""When the tracker closes a transaction left open on its input, and how it reads the
record it closes it with back (``services.tracker.open_transactions``): plain functions."""

from __future__ import annotations

from typing import Any, cast

from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.services.tracker.open_transactions import (
    HeldOpen,
    Stage,
    Verdict,
    closer_key,
    judge,
)
from sagalog.tracker.actions import TRACKER_SOURCE
from sagalog.tracker.decoding import (
    OPEN_TRANSACTION_CLOSED,
    Closer,
    TrackedEvent,
    Unreadable,
    read_event,
)

P1 = ("procurement.events", 1)
P2 = ("procurement.events", 2)


def looks(*spans: dict[tuple[str, int], tuple[int, int]], every_s: float = 5.0) -> list[Verdict]:
    """Feed ``spans`` to ``judge`` one look apart, 30 s after_s; every verdict."""
    held: dict[tuple[str, int], HeldOpen] = {}
    verdicts = []
    for i, span in enumerate(spans):
        verdict = judge(held, span, now=i * every_s, after_s=30.0)
        held = verdict.held
        verdicts.append(verdict)
    return verdicts


def test_a_partition_held_at_one_offset_past_the_wait_is_closed_once() -> None:
    verdicts = looks(*[{P1: (314, 327)}] * 8)  # 0, 5, .. 35 s
    closes = [i for i, v in enumerate(verdicts) if v.close]
    assert closes == [6]  # at 30 s, the first look past after_s
    assert verdicts[6].close == [P1]
    assert verdicts[-1].held[P1].stage is Stage.CLOSING
    assert not any(v.report for v in verdicts)


def test_a_partition_still_held_after_its_closing_record_is_reported_once() -> None:
    verdicts = looks(*[{P1: (314, 327)}] * 20)  # to 95 s
    reports = [i for i, v in enumerate(verdicts) if v.report]
    assert reports == [12]  # 30 s after the close at 30 s
    assert verdicts[-1].held[P1].stage is Stage.REPORTED
    assert sum(len(v.close) for v in verdicts) == 1  # never closed again at that offset


def test_a_stable_offset_that_moves_is_an_ordinary_transaction_never_closed() -> None:
    moving = [{P1: (100 + 10 * i, 120 + 10 * i)} for i in range(30)]
    assert not any(v.close or v.report for v in looks(*moving))


def test_a_partition_read_to_its_end_leaves_the_watch_and_starts_afresh_if_held_again() -> None:
    verdicts = looks(
        *[{P1: (314, 327)}] * 7,  # closed at 30 s
        {P1: (329, 329)},  # ended: not held
        *[{P1: (400, 410)}] * 7,  # held again, elsewhere: a new wait
    )
    assert P1 not in verdicts[7].held
    assert [i for i, v in enumerate(verdicts) if v.close] == [6, 14]


def test_partitions_are_judged_each_on_its_own() -> None:
    verdicts = looks(
        *[{P1: (314, 327), P2: (50 + i, 60 + i)} for i in range(7)],
    )
    assert verdicts[6].close == [P1]
    assert verdicts[6].held[P2].stage is Stage.WATCHED


def test_an_offset_at_or_past_the_end_is_not_held() -> None:
    assert judge({}, {P1: (327, 327), P2: (12, 3)}, now=0, after_s=30).held == {}


def closer_headers(source: str = TRACKER_SOURCE) -> list[tuple[str, Any]]:
    headers = EventHeaders(
        id="e-1", type=OPEN_TRANSACTION_CLOSED, source=source, workflow_id=closer_key(1)
    )
    return [(name, str(value).encode()) for name, value in headers.to_kafka()]


NO_CODEC = cast(EventCodec, None)  # a closer's value is never decoded


def test_the_trackers_closing_record_is_read_back_as_a_closer_with_no_value() -> None:
    read = read_event(NO_CODEC, closer_key(1).encode(), None, closer_headers())
    assert read == Closer("e-1")


def test_a_closing_type_from_another_source_is_an_input_like_any_other() -> None:
    read = read_event(NO_CODEC, closer_key(1).encode(), None, closer_headers("someone/else"))
    assert isinstance(read, TrackedEvent | Unreadable)
    assert not isinstance(read, Closer)


def test_the_closer_key_names_the_partition_and_no_workflow() -> None:
    assert closer_key(7) == "sagalog.saga-tracker.p7"
    assert closer_key(7) != closer_key(17)
