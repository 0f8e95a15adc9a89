"""When a reader closes a transaction left open on its input, and how the record it
closes it with reads back (``sagalog.open_transactions``): plain functions."""

from __future__ import annotations

from typing import cast

from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import H_CONTENT_TYPE, header_dict
from sagalog.open_transactions import (
    OPEN_TRANSACTION_CLOSED,
    HeldOpen,
    Stage,
    Verdict,
    cleared,
    closer,
    closer_key,
    held_by_another,
    judge,
    mark_health,
    problem_name,
)
from sagalog.tracker.actions import TRACKER_SOURCE
from sagalog.tracker.decoding import Closer, read_event

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


def test_a_paused_partition_keeps_its_state_however_stale_its_figures() -> None:
    """A paused partition is not fetched: its figures are the last fetch's. It is
    neither closed nor reported while paused, nor dropped from the watch (which would
    clear a report), and is judged again from where it was once read again."""
    held: dict[tuple[str, int], HeldOpen] = {}
    now = 0.0
    for _ in range(7):  # watched 0 .. 30 s: closed at 30 s
        verdict = judge(held, {P1: (314, 327)}, now=now, after_s=30.0)
        held, now = verdict.held, now + 5
    assert held[P1].stage is Stage.CLOSING
    for _ in range(20):  # paused for 100 s, figures unchanged or gone
        verdict = judge(held, {P1: (314, 327)}, now=now, after_s=30.0, paused=[P1])
        assert not verdict.close and not verdict.report
        assert verdict.held[P1] == HeldOpen(314, 30.0, Stage.CLOSING)
        held, now = verdict.held, now + 5
    assert judge(held, {}, now=now, after_s=30.0, paused=[P1]).held[P1].stage is Stage.CLOSING
    resumed = judge(held, {P1: (314, 327)}, now=now, after_s=30.0)
    assert resumed.report == [P1]  # fetched again and still held: another producer's


def test_a_paused_partition_is_not_watched_from_stale_figures() -> None:
    verdicts = [
        judge({}, {P1: (314, 327), P2: (5, 9)}, now=0.0, after_s=30.0, paused={P1}),
    ]
    assert P1 not in verdicts[0].held
    assert verdicts[0].held[P2].stage is Stage.WATCHED


def test_partitions_are_judged_each_on_its_own() -> None:
    verdicts = looks(
        *[{P1: (314, 327), P2: (50 + i, 60 + i)} for i in range(7)],
    )
    assert verdicts[6].close == [P1]
    assert verdicts[6].held[P2].stage is Stage.WATCHED


def test_an_offset_at_or_past_the_end_is_not_held() -> None:
    assert judge({}, {P1: (327, 327), P2: (12, 3)}, now=0, after_s=30).held == {}


NO_CODEC = cast(EventCodec, None)  # a closer's value is never decoded


def test_the_trackers_closing_record_reads_back_as_a_closer_with_no_value() -> None:
    key, headers = closer(source=TRACKER_SOURCE, writer="saga-tracker", partition=1)
    assert key == b"sagalog.saga-tracker.p1"
    read = read_event(NO_CODEC, key, None, [(n, v.encode()) for n, v in headers])
    assert isinstance(read, Closer)
    assert read.event_id == header_dict(headers)["ce_id"]


def test_an_agents_closing_record_is_skipped_by_the_tracker_too() -> None:
    key, headers = closer(source="sagalog/budget-agent", writer="budget-agent", partition=2)
    assert key == b"sagalog.budget-agent.p2"
    assert isinstance(read_event(NO_CODEC, key, None, headers), Closer)


def test_a_closing_record_says_its_type_and_claims_no_content() -> None:
    _, headers = closer(source=TRACKER_SOURCE, writer="saga-tracker", partition=0)
    named = header_dict(headers)
    assert named["ce_type"] == OPEN_TRANSACTION_CLOSED
    assert named["ce_workflowid"] == closer_key("saga-tracker", 0)
    assert H_CONTENT_TYPE not in named


def test_the_closer_key_names_the_writer_and_the_partition() -> None:
    assert closer_key("saga-tracker", 7) == "sagalog.saga-tracker.p7"
    assert closer_key("saga-tracker", 7) != closer_key("saga-tracker", 17)


def test_a_partition_held_by_another_says_where_and_what_to_run() -> None:
    text = held_by_another("the tracker", "orders.events", 1, (314, 327))
    assert "orders.events/1 is held open at offset 314 (log end 327)" in text
    assert "kafka-transactions.sh find-hanging" in text


def test_a_reported_problem_clears_once_its_partition_is_not_held_there_any_more() -> None:
    verdicts = looks(*[{P1: (314, 327), P2: (5, 9)}] * 13)  # both reported at 60 s
    reported = [problem_name(P1), problem_name(P2), "kafka"]
    assert cleared(reported, verdicts[-1]) == []
    after = judge(verdicts[-1].held, {P2: (5, 9)}, now=65, after_s=30)  # P1 read to its end
    assert cleared(reported, after) == [problem_name(P1)]  # another problem is not ours
    moved = judge(after.held, {P2: (6, 9)}, now=70, after_s=30)  # P2 held elsewhere: new wait
    assert cleared(reported, moved) == [problem_name(P1), problem_name(P2)]


def test_mark_health_degrades_for_a_report_and_recovers_when_it_clears() -> None:
    from sagalog.health import HealthBook

    health = HealthBook()
    verdicts = looks(*[{P1: (314, 327)}] * 13)
    said = [mark_health(health, v, {P1: (314, 327)}, reader="the tracker") for v in verdicts]
    assert [len(s) for s in said].count(1) == 1  # reported once
    assert list(health.problems) == [problem_name(P1)]
    ended = judge(verdicts[-1].held, {}, now=70, after_s=30)  # the holder ended it
    assert mark_health(health, ended, {}, reader="the tracker") == []
    assert not health.problems
