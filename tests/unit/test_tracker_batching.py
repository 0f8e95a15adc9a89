"""The tracker's batching over its stream, with a plain async iterator for faust's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from sagalog.services.tracker.batching import drained_batches

from .timing import VirtualTimeLoop, run_virtual


@dataclass
class _Message:
    """faust's message, as far as batching reads it."""

    generation_id: int
    topic: str = "orders.events"
    partition: int = 0
    offset: int = 0


@dataclass
class _Event:
    n: int
    message: _Message


async def _collect(source: AsyncIterator[_Event], max_: int, **kw: object) -> list[list[int]]:
    return [[e.n for e in batch] async for batch in drained_batches(source, max_, **kw)]  # type: ignore[arg-type]


def test_what_is_there_is_taken_at_once_up_to_the_most() -> None:
    async def source() -> AsyncIterator[_Event]:
        for n in range(7):
            yield _Event(n, _Message(1))

    async def run() -> list[list[int]]:
        return await _collect(source(), 3)

    batches = asyncio.run(run())
    assert [n for batch in batches for n in batch] == list(range(7))  # all, in order
    assert all(1 <= len(batch) <= 3 for batch in batches)


def test_a_lone_event_is_not_held_for_company() -> None:
    # On virtual time any wait for company (a linger timer, or the source's next
    # event an hour away) would show on the loop's clock; none may pass.
    async def run(loop: VirtualTimeLoop) -> float:
        async def source() -> AsyncIterator[_Event]:
            yield _Event(1, _Message(1))
            await asyncio.sleep(3600)  # nothing else comes

        batches = drained_batches(source(), 100)
        first = await batches.__anext__()
        took = loop.time()
        assert [e.n for e in first] == [1]
        await batches.aclose()
        return took

    assert run_virtual(run) == 0.0


def test_events_of_an_older_generation_are_dropped() -> None:
    async def source() -> AsyncIterator[_Event]:
        yield _Event(1, _Message(1))
        yield _Event(2, _Message(2))

    assert asyncio.run(_collect(source(), 10, generation=lambda: 2)) == [[2]]


def test_a_failing_stream_fails_the_batches() -> None:
    async def source() -> AsyncIterator[_Event]:
        yield _Event(1, _Message(1))
        raise RuntimeError("broken stream")

    with pytest.raises(RuntimeError, match="broken stream"):
        asyncio.run(_collect(source(), 10))
