"""Which fetched records faust's consumer thread hands over (``services.tracker.transport``).

aiokafka's own ``Fetcher.fetched_records`` runs here, on a fetch buffer holding
records of one stream partition, with the set of partitions faust lets flow. The
first test pins the aiokafka rule the fix exists for (an empty set is taken for
"every partition"); if aiokafka changes it, that test says the view may go.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiokafka.consumer.fetcher import Fetcher, FetchResult
from aiokafka.structs import TopicPartition

from sagalog.services.tracker.transport import _Flowing

STREAM = TopicPartition("orders.events", 0)
CHANGELOG = TopicPartition("tracker-records-changelog", 0)


class _Records:
    """Records 85-96 of the stream partition, fetched after the seek to 85."""

    def __init__(self) -> None:
        self.next_fetch_offset = 85
        self._left = list(range(85, 97))

    def __iter__(self) -> _Records:
        return self

    def __next__(self) -> Any:
        if not self._left:
            raise StopIteration
        offset = self._left.pop(0)
        self.next_fetch_offset = offset + 1
        return SimpleNamespace(offset=offset)


class _Position:
    def __init__(self) -> None:
        self.position = 85
        self.paused = False  # paused in faust only: aiokafka fetches it

    def consumed_to(self, offset: int) -> None:
        self.position = offset


def _fetcher() -> tuple[Any, _Position]:
    position = _Position()
    assignment = SimpleNamespace(active=True, state_value=lambda tp: position)
    fetcher: Any = Fetcher.__new__(Fetcher)  # aiokafka's method, no client behind it
    fetcher.__dict__.update(
        _subscriptions=SimpleNamespace(reassignment_in_progress=False, is_assigned=lambda tp: True),
        _records={
            STREAM: FetchResult(
                STREAM, assignment=assignment, partition_records=_Records(), backoff=0
            )
        },
        _notify=lambda future: None,
        _wait_consume_future=None,
        _closed=False,
    )
    return fetcher, position


def _drain(fetcher: Any, partitions: Any) -> dict[Any, list[Any]]:
    return asyncio.run(fetcher.fetched_records(partitions, timeout=0))


def test_aiokafka_takes_an_empty_set_for_every_partition() -> None:
    fetcher, position = _fetcher()
    drained = _drain(fetcher, set())  # faust's active set, changelogs read, streams paused
    assert [r.offset for r in drained[STREAM]] == list(range(85, 97))
    assert position.position == 97  # past records faust then drops as not active


def test_through_the_view_an_empty_set_hands_over_nothing() -> None:
    fetcher, position = _fetcher()
    assert _drain(fetcher, _Flowing(set())) == {}
    assert position.position == 85  # the seek holds
    assert STREAM in fetcher._records  # still buffered for when the partition resumes


def test_the_view_follows_faust_s_set_as_it_changes() -> None:
    fetcher, _ = _fetcher()
    live = {CHANGELOG}
    flowing = _Flowing(live)
    assert _drain(fetcher, flowing) == {}
    live.add(STREAM)  # faust resumes the stream partition after the seek
    assert [r.offset for r in _drain(fetcher, flowing)[STREAM]] == list(range(85, 97))
    assert STREAM in flowing and len(flowing) == 2 and set(flowing) == live
