"""Batches and hand-overs take turns (``services.tracker.handover``), step by step.

Each test drives the coroutines with ``asyncio.sleep(0)`` hops and asserts the
order of what happened: no wall clock is involved.
"""

from __future__ import annotations

import asyncio

from sagalog.services.tracker.handover import Turns


async def _hops(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_hand_over_waits_for_the_batch_in_hand() -> None:
    async def run() -> list[str]:
        turns, seen = Turns(), []
        acked = asyncio.Event()

        async def batch() -> None:
            async with turns.batch():
                seen.append("batch started")
                await acked.wait()  # waiting for Kafka's acknowledgements
                seen.append("batch stored")

        async def hand_over() -> None:
            await turns.hold()
            seen.append("tables let go")

        deciding = asyncio.create_task(batch())
        await _hops()
        handing = asyncio.create_task(hand_over())
        await _hops()
        assert seen == ["batch started"]  # the hand-over is still waiting
        acked.set()
        await asyncio.gather(deciding, handing)
        return seen

    assert asyncio.run(run()) == ["batch started", "batch stored", "tables let go"]


def test_no_batch_starts_while_held_and_one_starts_after_release() -> None:
    async def run() -> list[str]:
        turns, seen = Turns(), []
        await turns.hold()

        async def batch() -> None:
            async with turns.batch():
                seen.append("batch")

        waiting = asyncio.create_task(batch())
        await _hops()
        assert seen == []
        await turns.release()
        await waiting
        return seen

    assert asyncio.run(run()) == ["batch"]


def test_a_hand_over_goes_before_a_batch_already_waiting() -> None:
    async def run() -> list[str]:
        turns, seen = Turns(), []
        acked = asyncio.Event()

        async def batch(name: str, wait: bool) -> None:
            async with turns.batch():
                seen.append(name)
                if wait:
                    await acked.wait()

        first = asyncio.create_task(batch("first", True))
        await _hops()
        second = asyncio.create_task(batch("second", False))  # queued behind the first
        await _hops()
        handing = asyncio.create_task(turns.hold())
        await _hops()
        acked.set()
        await handing
        await _hops()
        assert seen == ["first"]  # the second did not slip in before the hand-over
        await turns.release()
        await asyncio.gather(first, second)
        return seen

    assert asyncio.run(run()) == ["first", "second"]


def test_holding_twice_is_holding_once_and_a_stop_never_hangs_on_it() -> None:
    async def run() -> bool:
        turns = Turns()
        await turns.hold()  # a revocation
        await asyncio.wait_for(turns.hold(), timeout=5)  # then the stop: returns at once
        return turns.held

    assert asyncio.run(run())


def test_a_failed_batch_ends_its_turn() -> None:
    async def run() -> bool:
        turns = Turns()
        try:
            async with turns.batch():
                raise RuntimeError("refused")
        except RuntimeError:
            pass
        await asyncio.wait_for(turns.hold(), timeout=5)
        return turns.held

    assert asyncio.run(run())
