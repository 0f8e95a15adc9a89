"""The tracker's batching over its input, with a plain async iterator for the records."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from sagalog.services.tracker.batching import drained_batches

from .timing import VirtualTimeLoop, run_virtual


@dataclass
class _Record:
    """An input record, as far as batching reads it."""

    n: int
    generation_id: int
    topic: str = "orders.events"
    partition: int = 0
    offset: int = 0


async def _collect(source: AsyncIterator[_Record], max_: int, **kw: object) -> list[list[int]]:
    return [[e.n for e in batch] async for batch in drained_batches(source, max_, **kw)]  # type: ignore[arg-type]


def test_what_is_there_is_taken_at_once_up_to_the_most() -> None:
    async def source() -> AsyncIterator[_Record]:
        for n in range(7):
            yield _Record(n, 1)

    async def run() -> list[list[int]]:
        return await _collect(source(), 3)

    batches = asyncio.run(run())
    assert [n for batch in batches for n in batch] == list(range(7))  # all, in order
    assert all(1 <= len(batch) <= 3 for batch in batches)


def test_a_lone_event_is_not_held_for_company() -> None:
    # On virtual time any wait for company (a linger timer, or the source's next
    # event an hour away) would show on the loop's clock; none may pass.
    async def run(loop: VirtualTimeLoop) -> float:
        async def source() -> AsyncIterator[_Record]:
            yield _Record(1, 1)
            await asyncio.sleep(3600)  # nothing else comes

        batches = drained_batches(source(), 100)
        first = await batches.__anext__()
        took = loop.time()
        assert [e.n for e in first] == [1]
        await batches.aclose()
        return took

    assert run_virtual(run) == 0.0


def test_events_of_an_older_generation_are_dropped() -> None:
    async def source() -> AsyncIterator[_Record]:
        yield _Record(1, 1)
        yield _Record(2, 2)

    assert asyncio.run(_collect(source(), 10, generation=lambda: 2)) == [[2]]


def test_a_failing_stream_fails_the_batches() -> None:
    async def source() -> AsyncIterator[_Record]:
        yield _Record(1, 1)
        raise RuntimeError("broken stream")

    with pytest.raises(RuntimeError, match="broken stream"):
        asyncio.run(_collect(source(), 10))


def _first_batch_and_when(
    source: AsyncIterator[_Record], max_: int, linger_s: float
) -> tuple[list[int], float]:
    """The first batch of ``source`` and the loop time it came at, on virtual time."""

    async def run(loop: VirtualTimeLoop) -> tuple[list[int], float]:
        batches = drained_batches(source, max_, linger_s=linger_s)
        first = await batches.__anext__()
        took = loop.time()
        await batches.aclose()
        return [e.n for e in first], took

    return run_virtual(run)


async def _trickle(count: int, every_s: float) -> AsyncIterator[_Record]:
    for n in range(count):
        yield _Record(n, 1)
        await asyncio.sleep(every_s)
    await asyncio.sleep(3600)  # nothing else comes


def test_a_lingering_batch_takes_what_comes_within_the_linger() -> None:
    batch, at = _first_batch_and_when(_trickle(10, every_s=0.1), max_=100, linger_s=0.25)
    assert batch == [0, 1, 2]  # 0 at t=0, 1 at 0.1, 2 at 0.2; 3 at 0.3 is past it
    assert at == pytest.approx(0.25)


def test_a_lingering_batch_goes_as_soon_as_it_is_whole() -> None:
    batch, at = _first_batch_and_when(_trickle(10, every_s=0.1), max_=3, linger_s=60)
    assert batch == [0, 1, 2]
    assert at == pytest.approx(0.2)  # not the 60 s linger


def test_a_lingering_batch_of_an_ended_stream_goes_at_once() -> None:
    async def source() -> AsyncIterator[_Record]:
        yield _Record(1, 1)

    batch, at = _first_batch_and_when(source(), max_=100, linger_s=60)
    assert (batch, at) == ([1], 0.0)


def _batches_and_when(
    source: AsyncIterator[_Record], max_: int, count: int, **kw: float
) -> list[tuple[list[int], float]]:
    """The first ``count`` batches of ``source`` and the loop time each came at."""

    async def run(loop: VirtualTimeLoop) -> list[tuple[list[int], float]]:
        batches = drained_batches(source, max_, **kw)  # type: ignore[arg-type]
        got = []
        for _ in range(count):
            batch = await batches.__anext__()
            got.append(([e.n for e in batch], loop.time()))
        await batches.aclose()
        return got

    return run_virtual(run)


def test_batches_start_at_most_once_an_interval_and_the_first_goes_at_once() -> None:
    got = _batches_and_when(_trickle(10, every_s=0.1), max_=100, count=3, interval_s=0.22)
    assert got == [
        ([0], 0.0),  # after a quiet spell: at once
        ([1, 2], pytest.approx(0.22)),  # 1 came at 0.1 and waited for the interval's end
        ([3, 4], pytest.approx(0.44)),
    ]


def test_an_event_after_the_interval_goes_at_once() -> None:
    got = _batches_and_when(_trickle(3, every_s=1.0), max_=100, count=3, interval_s=0.25)
    assert got == [([0], 0.0), ([1], pytest.approx(1.0)), ([2], pytest.approx(2.0))]


def test_a_whole_batch_does_not_wait_out_the_interval() -> None:
    got = _batches_and_when(_trickle(10, every_s=0.01), max_=3, count=2, interval_s=60)
    assert got[1] == ([1, 2, 3], pytest.approx(0.03))
