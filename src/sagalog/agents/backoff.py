"""Retry delays: exponential backoff with full jitter.

Full jitter (a uniform draw between zero and the exponential cap) spreads the
retries of many workflows that failed together, so a recovering dependency is not
hit by a synchronized wave (AWS Architecture Blog, "Exponential Backoff and Jitter").
The random draw is a parameter so tests pin it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

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
