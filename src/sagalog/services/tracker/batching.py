"""Batches of what has arrived: wait for the first record, take what else is there.

The records are the tracker's input (``log_input``) and the clock's ticks. faust's
``take_events(max, within)`` wakes every ``within`` to look at its buffer, events or
not: an idle tracker spends CPU on those wake-ups alone, nearly all of it the event loop
going round (docs/design/tuning-measurements.md). It also holds a lone event until the
timer comes round. Here a pump task moves events into a queue; a batch starts when the
first one arrives (no timer while idle) and takes whatever else is queued already, up to
``max_``, without waiting for more. Under load the queue fills while the previous batch
is decided, so batches grow by themselves; at low load a hand-off waits for nothing.

An interval (``interval_s``, as the agents' ``batch_interval_s``) bounds how many
batches start: at most one per interval, so a busy tracker's batches grow instead
of multiplying, each costing a transaction per partition, while the first event
after a quiet spell is decided at once. A linger (``linger_s``) waits longer for
company: every batch's first event waits up to ``linger_s``, idle or not. Both end
early once a whole batch is queued. The
tracker is not on the path of a hand-off between agents (they react to each other's
events), so holding its batch costs latency only where someone waits on what it
publishes (a gate opened, a compensation requested), while a saga whose events
fall in one batch writes its record and its timers once, not once per event.

Events read before a rebalance may still be queued after it; those of an older
consumer generation are dropped (the next owner of their partition reads them
again from the committed offset), as faust's own stream drops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

_END = object()

log = logging.getLogger("sagalog.tracker")


async def drained_batches(
    events: AsyncIterator[Any],
    max_: int,
    *,
    linger_s: float = 0.0,
    interval_s: float = 0.0,
    generation: Callable[[], int] | None = None,
) -> AsyncIterator[list[Any]]:
    """Yield lists of events from ``events``: at least one, at most ``max_``.

    Args:
        events: the records (``log_input.LogInput.records``, or any async iterator
            of objects with faust's message fields).
        max_: the most events in one batch.
        linger_s: how long a batch's first event waits for more, unless a whole
            batch is queued sooner (0: take what is there).
        interval_s: the least time between the starts of two batches; an event that
            comes later than that after the last start goes at once.
        generation: the consumer generation now; records whose ``generation_id``
            differs are dropped.

    Raises:
        Exception: whatever iterating ``events`` raised, at the next batch.
    """
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=max_ * 2)
    failure: list[BaseException] = []
    full = asyncio.Event()  # the rest of a batch is queued, or the stream ended

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
                if queue.qsize() >= max_ - 1:
                    full.set()
        except Exception as exc:  # handed to the consumer of the batches
            failure.append(exc)
        finally:
            await queue.put(_END)
            full.set()

    task = asyncio.create_task(pump(), name="tracker-batch-pump")
    loop = asyncio.get_running_loop()
    started = float("-inf")  # when the last batch was handed out
    try:
        while True:
            batch = [await queue.get()]
            if batch[0] is not _END:
                now = loop.time()
                until = max(now + linger_s, started + interval_s)
                if until > now:
                    full.clear()
                    if queue.qsize() < max_ - 1 and not task.done():
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(full.wait(), until - now)
            while len(batch) < max_ and not queue.empty():
                batch.append(queue.get_nowait())
            ended = _END in batch
            batch = [event for event in batch if event is not _END]
            if generation is not None:
                batch = of_generation(batch, generation())
            if batch:
                started = loop.time()
                yield batch
            if ended:
                if failure:
                    raise failure[0]
                return
    finally:
        task.cancel()


def of_generation(events: list[Any], now: int) -> list[Any]:
    """The events read in consumer generation ``now``; the others' partitions were
    handed over since, and their next owner reads them again from the committed offset."""
    kept = [e for e in events if e.generation_id == now]
    if len(kept) < len(events):
        dropped: dict[str, list[int]] = {}
        for message in events:
            if message.generation_id != now:
                where = f"{message.topic}/{message.partition}"
                dropped.setdefault(where, []).append(message.offset)
        log.info(
            "dropped %d record(s) read before the rebalance to generation %d: %s",
            len(events) - len(kept),
            now,
            {where: (min(o), max(o)) for where, o in dropped.items()},
            extra={"sagalog": {"agent": "saga-tracker", "action": "dropped_old_generation"}},
        )
    return kept
