"""Test doubles shared by unit tests."""

from __future__ import annotations


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
