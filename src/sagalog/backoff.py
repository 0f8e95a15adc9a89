"""Retry delays: exponential backoff with full jitter.

Full jitter (a uniform draw between zero and the exponential cap) spreads the
retries of many workflows that failed together, so a recovering dependency is not
hit by a synchronized wave (AWS Architecture Blog, "Exponential Backoff and Jitter").
The random draw is a parameter so tests pin it. ``RetryPolicy`` paces an agent handler's
retries through the retry topic; ``retry_within`` paces a client call retried in
place (a broker away for a few seconds) with the same delays, inside a time bound.
A leaf of the package: the agent runtime, the tracker service, the gateway and the
demo driver all pace their retries with it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sagalog.errors import ConfigurationError


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a handler is retried.

    Attributes:
        max_attempts: attempts in all, the first included; after the last one the
            event is dead-lettered and its step fails.
        base_delay_s: the cap of the first retry's delay.
        max_delay_s: no delay exceeds this, however many attempts.
        multiplier: growth of the cap per attempt.
    """

    max_attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 60.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError(
                f"retry policy: max_attempts={self.max_attempts}; set it to 1 or more "
                "(1 means no retry)"
            )
        if self.base_delay_s < 0 or self.max_delay_s < self.base_delay_s:
            raise ConfigurationError(
                f"retry policy: base_delay_s={self.base_delay_s}, "
                f"max_delay_s={self.max_delay_s}; need 0 <= base_delay_s <= max_delay_s"
            )
        if self.multiplier < 1:
            raise ConfigurationError(
                f"retry policy: multiplier={self.multiplier}; set it to 1 or more, "
                "or the delays shrink as the failures go on"
            )

    def cap(self, attempt: int) -> float:
        """The largest delay before retry number ``attempt`` (1 = the first retry).

        A long-failing workflow reaches attempt numbers where ``multiplier ** attempt``
        no longer fits in a float; the cap is then simply ``max_delay_s`` instead of
        an ``OverflowError`` in the retry path.
        """
        if self.base_delay_s == 0:
            return 0.0
        try:
            growth = self.base_delay_s * self.multiplier ** (attempt - 1)
        except OverflowError:
            return float(self.max_delay_s)
        return float(min(self.max_delay_s, growth))

    def delay(self, attempt: int, *, draw: Callable[[], float] = random.random) -> float:
        """The delay before retry ``attempt``: uniform in [0, cap(attempt)]."""
        return draw() * self.cap(attempt)

    def exhausted(self, attempts_made: int) -> bool:
        """Whether no attempt is left after ``attempts_made`` failed ones."""
        return attempts_made >= self.max_attempts


T = TypeVar("T")


def retry_within(
    call: Callable[[], T],
    *,
    policy: RetryPolicy,
    within_s: float,
    retry_on: tuple[type[BaseException], ...],
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    draw: Callable[[], float] = random.random,
) -> T:
    """``call()``, retried on ``retry_on`` with the policy's delays for at most ``within_s``.

    The bound is time, not attempts: a broker that is away for 20 s is ridden out
    by the same code whether its clients time out after 1 s or 10 s. A retry whose
    delay would end past the bound is not made; the last error is raised instead,
    so the caller decides what an outage longer than the bound means.

    Args:
        on_retry: told ``(attempt, error, delay_s)`` before each wait (a log line, a
            health report).
    """
    deadline = clock() + within_s
    attempt = 0
    while True:
        try:
            return call()
        except retry_on as exc:
            attempt += 1
            delay = max(policy.delay(attempt, draw=draw), min(policy.base_delay_s, 0.05))
            if clock() + delay > deadline:
                raise
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            sleep(delay)
