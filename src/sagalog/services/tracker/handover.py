"""Batches and hand-overs take turns: the tables are let go only between two batches.

faust lets go of a table partition's RocksDB when the partition is revoked (a
rebalance) and of all of them when the worker stops (``Store.stop`` clears its
databases). It waits for the streams first only through their acks, which the
tracker turned off (``offsets``). So a batch in hand at that moment went on: its
reads found no database and read as empty (``no workflow ... is tracked``), its
writes opened the databases again behind faust's back, and its offsets were
finished and committed as if all was well. A rolling restart of 1,000 workflows
under load lost 84 of them that way, every time the tracker's SIGTERM came while
a batch was waiting for its acknowledgements.

``Turns`` makes the two exclusive. A hand-over (``hold``: a revocation, a stop)
waits for the batch in hand to finish, stored and its offsets finished, and no
batch starts until ``release`` (the new assignment is in place and its tables are
restored or being restored; faust pauses those partitions until they are). A stop
never releases.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Turns:
    """One batch at a time, or one hand-over; a hand-over goes before any batch waiting."""

    def __init__(self) -> None:
        self._changed = asyncio.Condition()
        self._deciding = False
        self.held = False
        self.batch_since: float | None = None
        """When the batch in hand took its turn (``time.monotonic``); None between batches.
        The stall watch waits for a batch in hand rather than take it for a stall."""

    def batch_age_s(self, now: float) -> float | None:
        """How long the batch in hand has been in hand; None when there is none."""
        return None if self.batch_since is None else now - self.batch_since

    @asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        """A batch's turn: waits while a hand-over holds the tables or another batch runs."""
        async with self._changed:
            await self._changed.wait_for(lambda: not (self.held or self._deciding))
            self._deciding = True
            self.batch_since = time.monotonic()
        try:
            yield
        finally:
            async with self._changed:
                self._deciding = False
                self.batch_since = None
                self._changed.notify_all()

    async def hold(self) -> None:
        """Start no more batches and wait until the one in hand (if any) has finished.

        Holding twice is holding once (a stop during a rebalance).
        """
        async with self._changed:
            self.held = True
            await self._changed.wait_for(lambda: not self._deciding)

    async def release(self) -> None:
        """Let batches run again (the partitions are assigned anew)."""
        async with self._changed:
            self.held = False
            self._changed.notify_all()
