"""Which dead letters a listing keeps: the newest ``limit``, oldest first, read as a stream."""

from __future__ import annotations

from collections.abc import Iterator

from sagalog.dead_letters import DeadLetter
from sagalog.position import RecordPosition
from sagalog.services.gateway.dead_letter_operations import newest


def letter(offset: int, at_ms: int, partition: int = 0) -> DeadLetter:
    return DeadLetter(
        position=RecordPosition("orders.dlq", partition, offset),
        origin=RecordPosition("orders.events", 0, offset),
        agent="budget",
        reason="boom",
        error_class="ValueError",
        stack="",
        attempts=1,
        dead_lettered_at_ms=at_ms,
        event_type=None,
        event_id=None,
        workflow_id=None,
    )


def test_the_newest_are_kept_oldest_first() -> None:
    letters = [letter(n, at_ms=1_000 + (n * 7919) % 97) for n in range(97)]
    kept = newest(letters, 5)
    by_age = sorted(letters, key=lambda x: (x.dead_lettered_at_ms, str(x.position)))
    assert kept == by_age[-5:]


def test_letters_of_the_same_instant_are_ordered_by_position() -> None:
    kept = newest([letter(2, 5, partition=1), letter(9, 5, partition=0), letter(1, 4)], 2)
    assert [str(x.position) for x in kept] == ["orders.dlq/0/9", "orders.dlq/1/2"]


def test_a_long_stream_is_read_once_and_only_the_limit_is_returned() -> None:
    read = 0

    def stream() -> Iterator[DeadLetter]:
        nonlocal read
        for n in range(200_000):
            read += 1
            yield letter(n, at_ms=n)

    kept = newest(stream(), 3)
    assert read == 200_000
    assert [x.position.offset for x in kept] == [199_997, 199_998, 199_999]


def test_fewer_letters_than_the_limit_are_all_kept() -> None:
    assert newest([letter(0, 1)], 1000) == [letter(0, 1)]
    assert newest([], 10) == []
