"""An asyncio event loop on virtual time, and a bounded wait for what runs in threads.

Unit tests assert nothing about the wall clock: on a loaded machine (two cores, four
engineers, ``stress --cpu 2``) any "this took under 0.5 s" fails now and then. Code
that waits with ``asyncio.sleep`` and reads ``loop.time`` runs here on a clock that
jumps to the next timer whenever the loop has nothing else to do, so a test of a
2 s rate wait takes microseconds and reads exact times; ``clock`` is the loop's time
to hand to code that takes a ``clock`` callable.

What truly runs elsewhere (RocksDB's background flushes, a proxy thread) is waited
for with ``wait_until``: a generous bound that returns as soon as the condition holds.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

GENEROUS_S = 120.0


class _SkippingSelector(selectors.DefaultSelector):
    """Polls without blocking, and moves the loop's clock by the time it would block."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError(
                "virtual time: every task waits and no timer is set, so nothing can ever "
                "happen (a deadlock in the code under test, or a wait on real I/O)"
            )
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A loop whose ``time()`` starts at 0 and advances only when every task waits."""

    def __init__(self) -> None:
        self._skipping = _SkippingSelector()
        super().__init__(self._skipping)

    def time(self) -> float:
        return self._skipping.now


def run_virtual(main: Callable[[VirtualTimeLoop], Coroutine[Any, Any, T]]) -> T:
    """Run ``main(loop)`` to completion on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        return runner.run(main(loop))


def wait_until(condition: Callable[[], bool], *, what: str, within_s: float = GENEROUS_S) -> None:
    """Return as soon as ``condition()`` holds; fail naming ``what`` after ``within_s``.

    The bound is for a machine under full load, not a measure: a test that needs the
    answer within a time is a benchmark.
    """
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still not so after {within_s:.0f} s")
        time.sleep(0.02)
