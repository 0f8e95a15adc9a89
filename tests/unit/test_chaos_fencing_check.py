"""The fencing round's judge (tests/chaos/fencing_check.py), on hand-made logs.

A taken-over producer id's older epoch must not write after its fence, in log order
or after the takeover's moment; duplicate and stale transitions are findings.
"""

from __future__ import annotations

from chaos.checker import Transition
from chaos.fencing_check import (
    LogBatch,
    parse_dump,
    takeovers,
    transition_breaks,
    written_after_fencing,
)

DUMP = """\
Dumping /s/data/kafka-1/transitions.ab12-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 \
producerEpoch: 3 partitionLeaderEpoch: 0 isTransactional: true isControl: false \
deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1000 size: 180 magic: 2 \
compresscodec: none crc: 1 isvalid: true
| offset: 0 CreateTime: 1000 keySize: 3 valueSize: 50 sequence: 0 headerKeys: [ce_id]
| offset: 1 CreateTime: 1000 keySize: 3 valueSize: 50 sequence: 1 headerKeys: [ce_id]
baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 \
producerEpoch: 3 partitionLeaderEpoch: 0 isTransactional: true isControl: true \
deleteHorizonMs: OptionalLong.empty position: 180 CreateTime: 1010 size: 78 magic: 2 \
compresscodec: none crc: 2 isvalid: true
| offset: 2 CreateTime: 1010 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] \
endTxnMarker: COMMIT coordinatorEpoch: 0
Dumping /s/data/kafka-1/procurement.events.ab12-2/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 9 \
producerEpoch: 0 partitionLeaderEpoch: 1 isTransactional: false isControl: false \
deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 999 size: 90 magic: 2 \
compresscodec: none crc: 3 isvalid: true
""".replace("\\\n", "")


def batch(
    partition: str, offset: int, epoch: int, ms: int, *, marker: str | None = None, pid: int = 7
) -> LogBatch:
    return LogBatch(
        partition=partition,
        base_offset=offset,
        producer_id=pid,
        epoch=epoch,
        transactional=True,
        control=marker is not None,
        timestamp_ms=ms,
        marker=marker,
    )


def test_the_dump_gives_each_batch_its_partition_producer_epoch_time_and_marker() -> None:
    batches = parse_dump(DUMP)
    assert batches == [
        batch("transitions.ab12-0", 0, 3, 1000),
        batch("transitions.ab12-0", 2, 3, 1010, marker="COMMIT"),
        LogBatch("procurement.events.ab12-2", 0, 9, 0, False, False, 999),
    ]


def test_a_clean_takeover_is_no_finding() -> None:
    # epoch 3 writes and commits before the cut (2000); epoch 4 aborts what 3 left
    # open and writes on; 3 is never seen again
    log = [
        batch("t-0", 0, 3, 1000),
        batch("t-0", 1, 3, 1010, marker="COMMIT"),
        batch("t-0", 2, 3, 1990),
        batch("t-0", 3, 4, 2500, marker="ABORT"),
        batch("t-0", 4, 4, 2600),
        batch("t-0", 5, 4, 2610, marker="COMMIT"),
    ]
    assert takeovers(log, since_ms=2000) == {7: (3, 4, 2500)}
    assert written_after_fencing(log) == []


def test_an_older_epoch_committing_after_a_newer_one_is_a_finding_in_log_order() -> None:
    log = [
        batch("t-0", 0, 3, 1000),
        batch("t-0", 1, 4, 2500),
        batch("t-0", 2, 3, 1500),  # a zombie's batch, created before the takeover
        batch("t-0", 3, 3, 3100, marker="COMMIT"),
    ]
    found = written_after_fencing(log)
    assert any("t-0@2: producer 7 epoch 3 data after its epoch 4 (log order)" in f for f in found)
    assert any("t-0@3: producer 7 epoch 3 COMMIT marker after its epoch 4" in f for f in found)


def test_a_stale_write_where_the_new_owner_has_not_written_yet_is_found_by_time() -> None:
    # the new epoch wrote to partition 0 only; the old one commits in partition 1 later
    log = [
        batch("t-0", 0, 3, 1000),
        batch("t-1", 0, 3, 1000),
        batch("t-0", 1, 4, 2500),
        batch("t-1", 1, 3, 3200),
        batch("t-1", 2, 3, 3210, marker="COMMIT"),
    ]
    found = written_after_fencing(log)
    assert len(found) == 2
    assert all("after epoch 4 took it over at 2500" in f for f in found)


def test_an_older_epochs_abort_marker_is_no_finding_and_other_producers_are_left_alone() -> None:
    log = [
        batch("t-0", 0, 3, 1000),
        batch("t-0", 1, 4, 2500),
        batch("t-0", 2, 3, 3100, marker="ABORT"),
        batch("t-0", 3, 1, 3100, pid=8),  # another producer's own epoch: not taken over
    ]
    assert written_after_fencing(log) == []


def move(event_id: str, from_state: str, to_state: str, step: str | None = None) -> Transition:
    return Transition("w1", event_id, from_state, to_state, step)


def test_repeated_records_are_counted_and_decisions_taken_twice_or_stale_are_found() -> None:
    clean = [move("t1", "initiated", "running", "a"), move("t2", "running", "completed")]
    assert transition_breaks({"w1": clean}) == ([], 0)
    assert transition_breaks({"w1": [*clean[:1], clean[0], clean[1]]}) == ([], 1)
    twice = [clean[0], move("t9", "initiated", "running", "a"), clean[1]]
    found, _ = transition_breaks({"w1": twice})
    assert found == ["w1 #1: initiated->running decided twice (t1, t9)"]
    stale = [*clean, move("t3", "running", "failed")]
    found, _ = transition_breaks({"w1": stale})
    assert found == ["w1 #2: stale, t3 leaves running but the workflow was in completed"]
