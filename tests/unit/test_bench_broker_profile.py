"""The broker profile's split of JFR samples by request type (``tests.bench.broker_profile``)."""

from __future__ import annotations

import pytest

from .bench_modules import load_bench_module

_bench = load_bench_module("broker_profile")
kind_of = _bench.kind_of  # type: ignore[attr-defined]
parse_samples = _bench.parse_samples  # type: ignore[attr-defined]
shares = _bench.shares  # type: ignore[attr-defined]

PRINTED = """
jdk.ExecutionSample {
  startTime = 01:00:41.512 (2026-12-06)
  sampledThread = "data-plane-kafka-request-handler-3" (javaThreadId = 71)
  state = "STATE_RUNNABLE"
  stackTrace = [
    org.apache.kafka.storage.internals.log.UnifiedLog.read(long, int) line: 1402
    kafka.cluster.Partition.readRecords(...) line: 1321
    kafka.server.ReplicaManager.readFromLog(...) line: 1700
    kafka.server.DelayedFetch.onComplete() line: 170
    kafka.server.KafkaApis.handle(RequestChannel$Request, RequestLocal) line: 190
    ...
  ]
}

jdk.ExecutionSample {
  startTime = 01:00:41.522 (2026-12-06)
  sampledThread = "data-plane-kafka-request-handler-0" (javaThreadId = 68)
  state = "STATE_RUNNABLE"
  stackTrace = [
    kafka.coordinator.transaction.TransactionCoordinator.handleEndTransaction(...) line: 500
    kafka.server.KafkaApis.handleEndTxnRequest(RequestChannel$Request, RequestLocal) line: 1700
    kafka.server.KafkaApis.handle(RequestChannel$Request, RequestLocal) line: 190
  ]
}

jdk.ExecutionSample {
  startTime = 01:00:41.532 (2026-12-06)
  sampledThread = "TxnMarkerSenderThread-1" (javaThreadId = 80)
  state = "STATE_RUNNABLE"
  stackTrace = [
    kafka.server.ReplicaManager.appendRecords(...) line: 800
    kafka.coordinator.transaction.TransactionStateManager.appendTransactionToLog(...) line: 600
  ]
}
"""


def test_the_printed_recording_is_read_sample_by_sample() -> None:
    samples = parse_samples(PRINTED)

    assert [thread for thread, _ in samples] == [
        "data-plane-kafka-request-handler-3",
        "data-plane-kafka-request-handler-0",
        "TxnMarkerSenderThread-1",
    ]
    assert samples[1][1][:2] == [
        "kafka.coordinator.transaction.TransactionCoordinator.handleEndTransaction",
        "kafka.server.KafkaApis.handleEndTxnRequest",
    ]


@pytest.mark.parametrize(
    ("thread", "frames", "kind"),
    [
        # the request's handler on the stack names it, callbacks included
        ("h-1", ["x.Y.z", "kafka.server.KafkaApis.handleFetchRequest"], "api Fetch"),
        ("h-1", ["kafka.server.KafkaApis.$anonfun$handleProduceRequest$11"], "api Produce"),
        # the outermost handler is the one that was dispatched
        (
            "h-1",
            ["kafka.server.KafkaApis.handleFetchRequest", "kafka.server.KafkaApis.handleTxnX"],
            "api Fetch",
        ),
        # work done off its request's stack goes back to its request
        (
            "data-plane-kafka-request-handler-2",
            ["kafka.server.DelayedFetch.tryComplete"],
            "api Fetch",
        ),
        (
            "data-plane-kafka-request-handler-2",
            ["kafka.server.ReplicaManager.postVerificationCallback$1"],
            "api Produce",
        ),
        # the coordinators' own appends are theirs, not a client's produce
        (
            "TxnMarkerSenderThread-1",
            ["kafka.server.ReplicaManager.appendRecords"],
            "transaction markers (coordinator to leaders)",
        ),
        (
            "group-coordinator-event-processor-0",
            ["a.B.c"],
            "group coordinator (offset commits, heartbeats)",
        ),
        (
            "data-plane-kafka-network-thread-1-PLAINTEXT",
            ["a.B.c"],
            "network threads (requests in, responses out)",
        ),
        ("data-plane-kafka-request-handler-2", ["a.B.c"], "request handlers, other"),
        ("Notification Thread", [], "other"),
    ],
)
def test_a_sample_is_put_where_its_work_belongs(thread: str, frames: list[str], kind: str) -> None:
    assert kind_of(thread, frames) == kind


def test_shares_add_up_to_one_largest_first() -> None:
    got = shares(parse_samples(PRINTED))

    assert got == {
        "api Fetch": pytest.approx(1 / 3),
        "api EndTxn": pytest.approx(1 / 3),
        "transaction markers (coordinator to leaders)": pytest.approx(1 / 3),
    }
    assert shares([]) == {}
