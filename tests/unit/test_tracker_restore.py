"""The end of a restore (``services.tracker.restore``): where the streams start again.

A stand-in app and consumer record what the recovery asks of them, in order: the
order is the whole rule (seek while the stream partitions are paused, resume only
after), and the real-broker test of a worker paused through a rebalance is where
its effect on records shows (``tests/integration/test_tracker.py``).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from sagalog.services.tracker.restore import CommittedRecovery, restore_target

STREAM = TP("orders.events", 0)
CHANGELOG = TP("tracker-records-changelog", 0)


class _Consumer:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def assignment(self) -> set[TP]:
        return {STREAM, CHANGELOG}

    async def perform_seek(self) -> None:
        self.calls.append("seek")

    def resume_flow(self) -> None:
        self.calls.append("resume flow")

    def resume_partitions(self, tps: set[TP]) -> None:
        self.calls.append(f"resume {sorted(tp.topic for tp in tps)}")


class _Signal:
    async def send(self) -> None:
        return None


def _recovery(calls: list[str], *, generation: int = 4) -> Any:
    recovery: Any = CommittedRecovery.__new__(CommittedRecovery)  # no faust service
    consumer = _Consumer(calls)

    async def fetcher_start() -> None:
        calls.append("fetcher")

    async def table_done(actives: Any, standbys: Any) -> None:
        calls.append("tables ready")

    class _Table:  # hashable, as faust's tables are
        on_recovery_completed = staticmethod(table_done)

    table = _Table()
    recovery.__dict__.update(
        app=SimpleNamespace(
            consumer=consumer,
            consumer_generation_id=generation,
            conf=SimpleNamespace(broker_request_timeout=5.0),
            on_rebalance_complete=_Signal(),
            flow_control=SimpleNamespace(resume=lambda: calls.append("resume app flow")),
            _fetcher=SimpleNamespace(maybe_start=fetcher_start),
            assignor=SimpleNamespace(assigned_standbys=lambda: set()),
            on_rebalance_end=lambda: calls.append("rebalance end"),
        ),
        tables=SimpleNamespace(
            values=lambda: [table],
            changelog_topics={CHANGELOG.topic},
            on_actives_ready=lambda: None,
            on_standbys_ready=lambda: None,
        ),
        actives_for_table={table: {CHANGELOG}},
        standbys_for_table={table: set()},
        completed=asyncio.Event(),
        log=SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None),
        _set_recovery_ended=lambda: calls.append("recovery ended"),
    )

    async def wait(coro: Any, timeout: float | None = None) -> None:
        await coro

    recovery._wait = wait
    return recovery


def test_the_streams_are_sought_to_their_commits_before_any_record_flows() -> None:
    calls: list[str] = []
    recovery = _recovery(calls)
    asyncio.run(recovery.on_recovery_completed(generation_id=4))
    assert calls == [
        "recovery ended",
        "tables ready",
        "seek",
        "resume app flow",
        "resume flow",
        "resume ['orders.events']",  # the stream partitions only, and last
        "fetcher",
        "rebalance end",
    ]
    assert recovery.completed.is_set()


def test_a_recovery_overtaken_by_the_next_rebalance_resumes_nothing() -> None:
    calls: list[str] = []
    recovery = _recovery(calls, generation=5)
    asyncio.run(recovery.on_recovery_completed(generation_id=4))
    assert calls == ["recovery ended", "tables ready"]
    assert not recovery.completed.is_set()


def test_a_rebalance_during_the_seek_leaves_the_streams_to_the_next_recovery() -> None:
    calls: list[str] = []
    recovery = _recovery(calls)

    async def seek_then_rebalance() -> None:
        calls.append("seek")
        recovery.app.consumer_generation_id = 5  # the worker was frozen; it woke up late

    recovery.app.consumer.perform_seek = seek_then_rebalance
    asyncio.run(recovery.on_recovery_completed(generation_id=4))
    assert calls == ["recovery ended", "tables ready", "seek"]
    assert not recovery.completed.is_set()


def test_the_consumer_keeps_no_read_offsets_so_drops_no_record_as_already_read() -> None:
    from sagalog.services.tracker.transport import _NoReadOffsets

    read: Any = _NoReadOffsets()
    read[STREAM] = 1594  # faust, after records fetched before a seek
    read.update({STREAM: 1500})  # faust's seek
    assert read[STREAM] is None  # faust's drain: None lets every record through


# -- how far a partition is restored (``restore_target``) -----------------------------


def test_a_partition_is_restored_up_to_its_last_committed_record() -> None:
    assert restore_target(None, last_committed=5, log_end=7) == 5
    assert restore_target(3, last_committed=5, log_end=7) == 5
    assert restore_target(5, last_committed=5, log_end=7) == 5


def test_a_store_past_the_committed_end_but_inside_the_log_is_kept() -> None:
    # offsets 4-5 written in a transaction that committed; its markers never came
    assert restore_target(5, last_committed=2, log_end=6) == 5


def test_a_store_past_the_end_of_the_log_leaves_the_committed_end_to_faust_s_check() -> None:
    # the changelog lost records (recreated, truncated): the store is not trusted
    assert restore_target(9, last_committed=2, log_end=6) == 2
    assert restore_target(6, last_committed=2, log_end=6) == 2


class _Tails:
    """The changelog as a broker that dropped a commit's markers leaves it: records
    0-2 committed, 4-5 (committed by the coordinator) still in an open transaction."""

    def __init__(self) -> None:
        self.asked_ends: list[list[tuple[str, int]]] = []

    def last_committed(self, ends: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        return {key: 2 for key in ends}

    def log_ends(self, positions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.asked_ends.append(positions)
        return {key: 6 for key in positions}


def _highwaters(persisted: dict[TP, int | None], title: str) -> tuple[dict[TP, int], Any]:
    recovery: Any = CommittedRecovery.__new__(CommittedRecovery)
    loaded: list[dict[TP, int]] = []

    class _FaustConsumer:
        async def highwaters(self, *tps: TP) -> dict[TP, int]:
            return {tp: 4 for tp in tps}  # the last stable offset

    async def take(partitions: set[int]) -> None:
        return None

    async def load(highwaters: Any, offsets: Any) -> None:
        loaded.append(dict(highwaters))

    tails = _Tails()
    recovery.__dict__.update(
        tails=tails,
        take=take,
        _load=load,
        active_offsets=persisted if title == "active" else {},
        standby_offsets=persisted if title == "standby" else {},
        log=SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None),
    )
    destination: dict[TP, int] = {}
    other = TP(CHANGELOG.topic, 1)
    asyncio.run(
        recovery._build_highwaters(_FaustConsumer(), {CHANGELOG, other}, destination, title)
    )
    return destination, SimpleNamespace(tails=tails, loaded=loaded, other=other)


def test_an_active_store_past_the_committed_end_is_restored_from_nowhere() -> None:
    destination, seen = _highwaters({CHANGELOG: 5, TP(CHANGELOG.topic, 1): None}, "active")
    assert destination == {CHANGELOG: 5, seen.other: 2}
    assert seen.tails.asked_ends == [[(CHANGELOG.topic, 0)]]  # only the one ahead
    assert seen.loaded == [destination]


def test_a_standby_store_past_the_committed_end_is_kept_too() -> None:
    destination, seen = _highwaters({CHANGELOG: 5}, "standby")
    assert destination == {CHANGELOG: 5, seen.other: 2}
    assert seen.loaded == []  # standbys: faust reads on from the kept offset


def test_the_log_ends_are_not_asked_for_when_no_store_is_ahead() -> None:
    destination, seen = _highwaters({CHANGELOG: 2}, "active")
    assert destination == {CHANGELOG: 2, seen.other: 2}
    assert seen.tails.asked_ends == []
