"""The tracker's partition transactions, over a stand-in producer that fails on request.

What the real broker does with them (a worker paused through a rebalance is fenced)
is ``tests/integration/test_tracker.py``'s paused-worker test; here are the rules:
which id each partition gets, that a batch's transactions commit together, and what
each kind of failure becomes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from sagalog.errors import AuthorizationError
from sagalog.services.tracker.fencing import (
    BatchAborted,
    PartitionsFenced,
    PartitionTransactions,
    transactional_id,
)
from sagalog.services.tracker.settings import TrackerSettings
from sagalog.services.tracker.sink import KafkaSink


class _Producer:
    def __init__(self, config: dict[str, Any], failures: dict[str, list[KafkaError]]) -> None:
        self.id = config["transactional.id"]
        self.failures = failures
        self.calls: list[str] = []

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")
        pending = self.failures.get(self.id)
        if pending:
            raise KafkaException(pending.pop(0))

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")

    def flush(self, timeout: float) -> int:
        return 0


class _Lab:
    def __init__(self) -> None:
        self.failures: dict[str, list[KafkaError]] = {}
        self.made: list[_Producer] = []
        settings = TrackerSettings(app_id="saga-tracker")
        self.transactions = PartitionTransactions(settings, {}, make_producer=self._make)

    def _make(self, config: dict[str, Any]) -> _Producer:
        producer = _Producer(config, self.failures)
        self.made.append(producer)
        return producer

    def fail(self, partition: int, *errors: KafkaError) -> None:
        self.failures[transactional_id("saga-tracker-", partition)] = list(errors)


def test_each_partition_has_one_id_whoever_holds_it_and_a_batch_begins_once_per_partition() -> None:
    lab = _Lab()
    asyncio.run(lab.transactions.take([2, 0]))
    assert sorted(p.id for p in lab.made) == ["saga-tracker-p0", "saga-tracker-p2"]

    for _ in range(3):
        lab.transactions.producer(0)
    asyncio.run(lab.transactions.commit())

    first = next(p for p in lab.made if p.id == "saga-tracker-p0")
    assert first.calls == ["init", "begin", "commit"]
    assert lab.transactions.open == set()


def test_taking_a_partition_again_starts_a_new_producer_which_fences_the_old_holder() -> None:
    lab = _Lab()
    asyncio.run(lab.transactions.take([0]))
    asyncio.run(lab.transactions.take([0]))
    assert [p.id for p in lab.made] == ["saga-tracker-p0", "saga-tracker-p0"]
    assert lab.transactions.producers[0] is lab.made[1]


def test_a_fenced_partition_fails_the_batch_names_its_partitions_and_is_held_no_more() -> None:
    lab = _Lab()
    asyncio.run(lab.transactions.take([0, 1]))
    lab.fail(1, KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))
    lab.transactions.producer(0)
    lab.transactions.producer(1)

    with pytest.raises(PartitionsFenced, match=r"partitions \[1\].*saga-tracker-p1"):
        asyncio.run(lab.transactions.commit())

    assert sorted(lab.transactions.producers) == [0]
    with pytest.raises(PartitionsFenced, match="not held by this worker"):
        lab.transactions.producer(1)


def test_an_abortable_failure_aborts_the_transaction_and_the_batch_is_decided_again() -> None:
    lab = _Lab()
    asyncio.run(lab.transactions.take([0]))
    lab.fail(0, KafkaError(KafkaError._STATE, "abortable", txn_requires_abort=True))
    lab.transactions.producer(0)

    with pytest.raises(BatchAborted, match="decided again"):
        asyncio.run(lab.transactions.commit())
    assert lab.made[0].calls[-2:] == ["commit", "abort"]
    assert 0 in lab.transactions.producers  # still ours: the next batch begins anew


def test_a_retriable_commit_failure_is_retried() -> None:
    lab = _Lab()
    asyncio.run(lab.transactions.take([0]))
    lab.fail(0, KafkaError(KafkaError._TIMED_OUT, "slow coordinator", retriable=True))
    lab.transactions.producer(0)

    asyncio.run(lab.transactions.commit())
    assert lab.made[0].calls == ["init", "begin", "commit", "commit"]


def test_a_denied_transactional_id_names_the_principal_and_the_id() -> None:
    lab = _Lab()
    asyncio.run(lab.transactions.take([0]))
    lab.fail(
        0,
        KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "not authorized", fatal=True),
    )
    lab.transactions.producer(0)

    with pytest.raises(AuthorizationError, match="saga-tracker-p0"):
        asyncio.run(lab.transactions.commit())


def test_a_send_after_the_fence_is_refused_as_fenced() -> None:
    """librdkafka refuses a produce on a fenced producer with the generic ``_FATAL``."""
    lab = _Lab()
    asyncio.run(lab.transactions.take([0]))

    def refuse(topic: str, **record: Any) -> None:
        raise KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message"))

    lab.made[0].produce = refuse  # type: ignore[attr-defined]
    with pytest.raises(PartitionsFenced, match=r"partitions \[0\] were taken over"):
        lab.transactions.send(0, "orders.events", key=b"wf-1", value=b"")


class _ReportingProducer(_Producer):
    """Holds each record's delivery callback and serves it on ``poll``, as librdkafka
    does; an abort purges what was sent, each record reporting ``_PURGE_QUEUE``."""

    def __init__(self, config: dict[str, Any], failures: dict[str, list[KafkaError]]) -> None:
        super().__init__(config, failures)
        self.reports: list[tuple[Any, KafkaError | None]] = []
        self.sent: list[Any] = []

    def produce(self, topic: str, **record: Any) -> None:
        self.sent.append(record["on_delivery"])

    def commit_transaction(self, timeout: float) -> None:
        super().commit_transaction(timeout)
        self.reports += [(report, None) for report in self.sent]
        self.sent = []

    def abort_transaction(self, timeout: float) -> None:
        super().abort_transaction(timeout)
        purged = KafkaError(KafkaError._PURGE_QUEUE, "purged by the abort")
        self.reports += [(report, purged) for report in self.sent]
        self.sent = []

    def poll(self, timeout: float) -> int:
        served, self.reports = self.reports, []
        for report, error in served:
            report(error, _Message())
        return len(served)


class _Message:
    def topic(self) -> str:
        return "procurement.events"


def test_a_batch_decided_again_after_an_abort_is_not_failed_by_the_aborted_records() -> None:
    """The broker's outage aborts a commit; the batch is decided again, and the first
    attempt's purged records, reported then or later, refuse nothing of the second.
    (Before, the retry raised "Kafka refused 1 tracker record(s)" and the tracker
    exited 70 under a broker SIGKILL.)"""
    settings = TrackerSettings(app_id="saga-tracker", bootstrap_servers="127.0.0.1:1")
    sink = KafkaSink(settings, codec=None)  # type: ignore[arg-type]  # nothing is encoded
    made: list[_ReportingProducer] = []
    failures = {
        transactional_id("saga-tracker-", 0): [
            KafkaError(KafkaError._STATE, "coordinator away", txn_requires_abort=True)
        ]
    }

    def make(config: dict[str, Any]) -> _ReportingProducer:
        made.append(_ReportingProducer(config, failures))
        return made[-1]

    sink.transactions = PartitionTransactions(settings, {}, make_producer=make)

    async def attempts() -> None:
        await sink.transactions.take([0])
        sink.close_open_transaction("procurement.events", 0)
        with pytest.raises(BatchAborted):
            await sink.commit()
        made[0].reports = [
            (r, KafkaError(KafkaError._PURGE_QUEUE, "late")) for r, _ in made[0].reports
        ]
        sink.close_open_transaction("procurement.events", 0)  # the batch decided again
        await sink.flush()  # serves the first attempt's late purge reports
        await sink.commit()

    asyncio.run(attempts())
    assert made[0].calls == ["init", "begin", "commit", "abort", "begin", "commit"]
