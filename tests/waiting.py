"""Waiting for a condition in a test: a bounded poll, never a sleep that asserts timing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(condition: Callable[[], T], *, what: str, timeout: float, step: float = 0.25) -> T:
    """The first truthy value of ``condition()`` within ``timeout`` seconds; else fail
    naming ``what``. The bound is for a loaded machine, not a measure."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(step)
