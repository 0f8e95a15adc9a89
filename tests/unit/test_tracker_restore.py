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

from sagalog.services.tracker.restore import CommittedRecovery

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
