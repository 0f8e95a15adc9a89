"""One budget's reservations, and whether the next call fits: the pure rules.

A model call costs tokens and money, and an agent framework's users want both capped
per run and per tenant, durably: a crash must not forget what was spent, and a retry
must not pay twice. The rules, each a plain function of the ledger and a time:

- **Reserve before the call.** The call's estimate is counted as soon as it is
  reserved, so concurrent calls see each other before any has answered.
- **One reservation per idempotency key.** The key is the effect's (``agents.intents``):
  a retry, a redelivery or a replacement instance reserving again gets the first
  reservation back and counts nothing more.
- **Settle to what the model reports.** The usage a response states replaces the
  estimate where it was counted, at the reservation's time: the windows then hold
  what was really spent, over or under.
- **Two windows.** Tokens over any 60 s (a sliding window, so no minute boundary
  lets twice the limit through, as a bucket refilled per minute would) and money
  per UTC calendar day (what a finance limit means).
- **A call's tokens hold the window from its reservation until 60 s after its
  answer.** The provider counts a call when it arrives, some time after the
  reservation (a queue for a connection, a busy loop) and before the answer: held
  to the answer, any 60 s of arrivals fit the limit, however late each arrived. A
  call not answered yet holds it for ``UNANSWERED_MS`` after its reservation.
  Counted from the reservation alone, a burst reserved as the window refilled would
  reach the model seconds later, next to the following one, and the provider would
  count both in one minute (docs/design/incident-history.md).

Money is held in micros (millionths of the currency unit) as integers: sums of
floats drift, and a budget compared against a drifted sum is wrong at the edge.
Where the ledger lives, and how instances share it, is not decided here.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from enum import Enum

from sagalog.errors import ConfigurationError, SagalogError

#: The token window: any 60 s.
MINUTE_MS = 60_000
#: How long a call with no answer (yet) holds the token window after its reservation.
UNANSWERED_MS = 2 * MINUTE_MS
#: The money window: a UTC calendar day.
DAY_MS = 86_400_000
MICROS = 1_000_000


class BudgetExceeded(SagalogError):
    """A call whose estimate alone is over a budget's limit: it can never be granted.

    Raise the limit, or split the call (a shorter prompt, a lower ``max_tokens``).
    """


def money_micros(amount: str | int | Decimal, *, what: str) -> int:
    """An amount of money as written in a setting ("25", "0.0035"), in micros.

    Raises:
        ConfigurationError: not a finite, non-negative amount with at most six decimals.
    """
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value < 0:
        raise ConfigurationError(f"{what}: {amount!r} is not an amount of money; write e.g. 25.00")
    micros = value * MICROS
    if micros != micros.to_integral_value():
        raise ConfigurationError(
            f"{what}: {amount!r} has more than six decimals; budgets count millionths"
        )
    return int(micros)


@dataclass(frozen=True)
class Usage:
    """Tokens and money, one call's or a window's."""

    tokens: int = 0
    micros: int = 0

    def __post_init__(self) -> None:
        if self.tokens < 0 or self.micros < 0:
            raise ConfigurationError(
                f"usage of {self.tokens} tokens and {self.micros} micros: neither may be "
                "negative; a model that reports so is misread"
            )

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.tokens + other.tokens, self.micros + other.micros)


@dataclass(frozen=True)
class BudgetLimits:
    """What a budget allows; ``None`` is no limit on that measure."""

    tokens_per_minute: int | None = None
    micros_per_day: int | None = None

    def __post_init__(self) -> None:
        for name in ("tokens_per_minute", "micros_per_day"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigurationError(
                    f"budget limit {name}={value}: give a positive limit, or none for no limit"
                )

    def share(self, assigned: int, total: int) -> BudgetLimits:
        """The part of these limits ``assigned`` of ``total`` equal shares hold (floored,
        never 0 while a limit exists: a share that can grant nothing would stall its
        calls forever)."""
        if total <= 0 or not 0 <= assigned <= total:
            raise ConfigurationError(f"budget share {assigned} of {total}: not a share")

        def part(limit: int | None) -> int | None:
            return None if limit is None else max(1, limit * assigned // total)

        return BudgetLimits(part(self.tokens_per_minute), part(self.micros_per_day))


class Measure(Enum):
    TOKENS_PER_MINUTE = "tokens per minute"
    MONEY_PER_DAY = "money per day"


@dataclass(frozen=True)
class Reservation:
    """One call's claim on a budget: its estimate until settled, then what it used."""

    key: str
    at_ms: int
    estimate: Usage
    actual: Usage | None = None
    answered_ms: int | None = None

    @property
    def counted(self) -> Usage:
        return self.estimate if self.actual is None else self.actual

    @property
    def tokens_until_ms(self) -> int:
        """When its tokens leave the window: 60 s after its answer, or
        ``UNANSWERED_MS`` after its reservation while it has none."""
        if self.answered_ms is None:
            return self.at_ms + UNANSWERED_MS
        return max(self.answered_ms, self.at_ms) + MINUTE_MS


@dataclass(frozen=True)
class Granted:
    reservation: Reservation
    #: The key already held a reservation: nothing more was counted.
    repeated: bool = False


@dataclass(frozen=True)
class Exhausted:
    """Not now: the call fits once ``retry_at_ms`` comes (the window has moved on)."""

    measure: Measure
    retry_at_ms: int
    #: What the window holds now, and the limit it is held to.
    spent: int
    limit: int
    asked: int

    def __str__(self) -> str:
        return (
            f"{self.measure.value}: {self.spent} spent of {self.limit}, {self.asked} asked; "
            f"fits again at {self.retry_at_ms} ms"
        )


@dataclass
class Ledger:
    """One budget's reservations within its windows, oldest first.

    A state machine with the time passed in: ``reserve``, ``settle`` and ``release``
    are the only changes, so folding the same recorded changes rebuilds the same
    ledger on any instance.
    """

    name: str
    limits: BudgetLimits
    _by_key: dict[str, Reservation] = field(default_factory=dict)
    _times: list[tuple[int, str]] = field(default_factory=list)  # sorted (at_ms, key)
    #: The keys whose tokens may still hold the minute's window, so a reservation
    #: scans the last minutes' calls, not the whole day the money window keeps.
    _holding: dict[str, None] = field(default_factory=dict)

    def reserve(
        self, key: str, estimate: Usage, *, now_ms: int, force: bool = False
    ) -> Granted | Exhausted:
        """Count ``estimate`` now, unless the key holds a reservation already.

        ``force``: count it even over the limits. A person let the call go over (its
        step's budget gate was approved); it still holds the windows, so later calls
        wait for it to leave them.

        Raises:
            BudgetExceeded: the estimate alone is over a limit (unless ``force``).
        """
        held = self._by_key.get(key)
        if held is not None:
            return Granted(held, repeated=True)
        self.forget_before(now_ms)
        if not force:
            self._check_fits_ever(estimate)
            refusal = self._tokens_refusal(estimate, now_ms) or self._money_refusal(
                estimate, now_ms
            )
            if refusal is not None:
                return refusal
        reservation = Reservation(key=key, at_ms=now_ms, estimate=estimate)
        self._add(reservation)
        return Granted(reservation)

    def settle(self, key: str, actual: Usage, *, now_ms: int) -> Reservation:
        """Replace a reservation's estimate with the usage the model reported.

        A key with no reservation (one made before the ledger's windows, or on a
        ledger that lost it) is counted now: what was spent is never dropped.
        """
        held = self._by_key.get(key)
        if held is None:
            settled = Reservation(key, now_ms, estimate=actual, actual=actual, answered_ms=now_ms)
            self._add(settled)
            return settled
        settled = replace(held, actual=actual, answered_ms=now_ms)
        self._by_key[key] = settled
        self._holding[key] = None  # an answer after the window passed holds it again
        return settled

    def restore(self, reservation: Reservation) -> None:
        """Put back a reservation made earlier (read from the store or the log when an
        instance takes a partition over): counted as it was, not checked against the
        limit; a key held already keeps the settled one of the two."""
        held = self._by_key.get(reservation.key)
        if held is None:
            self._add(reservation)
        elif held.actual is None and reservation.actual is not None:
            self._by_key[reservation.key] = replace(
                held, actual=reservation.actual, answered_ms=reservation.answered_ms
            )
            self._holding[reservation.key] = None

    def release(self, key: str) -> None:
        """Drop an unsettled reservation: its call was never made (refused before
        sending). A settled one stays: it was spent."""
        held = self._by_key.get(key)
        if held is not None and held.actual is None:
            del self._by_key[key]
            self._times.remove((held.at_ms, key))
            self._holding.pop(key, None)

    def spent(self, *, now_ms: int) -> tuple[Usage, Usage]:
        """What the windows hold at ``now_ms``: (settled, reserved and not settled yet),
        tokens over the last minute and money over today."""
        settled, pending = Usage(), Usage()
        day_from = _day_start(now_ms)
        for at_ms, key in self._times:
            held = self._by_key[key]
            counted = Usage(
                tokens=held.counted.tokens if held.tokens_until_ms > now_ms else 0,
                micros=held.counted.micros if at_ms >= day_from else 0,
            )
            if held.actual is None:
                pending += counted
            else:
                settled += counted
        return settled, pending

    def reservations(self) -> list[Reservation]:
        return [self._by_key[key] for _, key in self._times]

    def forget_before(self, now_ms: int) -> None:
        """Drop the reservations no window holds any more (settled or not: an unsettled
        one that old belongs to a call that never reported). Its key is forgotten with
        it: a call retried after both windows have passed is a new spend."""
        cut = bisect.bisect_left(self._times, (held_from_ms(now_ms), ""))
        for _, key in self._times[:cut]:
            del self._by_key[key]
            self._holding.pop(key, None)
        del self._times[:cut]

    # -- the windows ---------------------------------------------------------------

    def _add(self, reservation: Reservation) -> None:
        self._by_key[reservation.key] = reservation
        bisect.insort(self._times, (reservation.at_ms, reservation.key))
        self._holding[reservation.key] = None

    def _check_fits_ever(self, estimate: Usage) -> None:
        limits = self.limits
        if limits.tokens_per_minute is not None and estimate.tokens > limits.tokens_per_minute:
            raise BudgetExceeded(
                f"budget '{self.name}': a call estimated at {estimate.tokens} tokens can never "
                f"fit {limits.tokens_per_minute} tokens per minute; raise the limit or "
                "split the call"
            )
        if limits.micros_per_day is not None and estimate.micros > limits.micros_per_day:
            raise BudgetExceeded(
                f"budget '{self.name}': a call estimated at {estimate.micros / MICROS} can "
                f"never fit {limits.micros_per_day / MICROS} per day; raise the limit or "
                "split the call"
            )

    def _tokens_refusal(self, estimate: Usage, now_ms: int) -> Exhausted | None:
        limit = self.limits.tokens_per_minute
        if limit is None or estimate.tokens == 0:
            return None
        window = []
        for key in list(self._holding):
            held = self._by_key[key]
            if held.tokens_until_ms > now_ms:
                window.append((held.tokens_until_ms, held.counted.tokens))
            else:
                del self._holding[key]
        spent = sum(tokens for _, tokens in window)
        if spent + estimate.tokens <= limit:
            return None
        window.sort()
        # The call fits once enough of the window has left it, each call when its
        # tokens stop holding it (``Reservation.tokens_until_ms``).
        leaving = spent
        retry_at = now_ms
        for until_ms, tokens in window:
            leaving -= tokens
            retry_at = until_ms
            if leaving + estimate.tokens <= limit:
                break
        return Exhausted(Measure.TOKENS_PER_MINUTE, retry_at, spent, limit, estimate.tokens)

    def _money_refusal(self, estimate: Usage, now_ms: int) -> Exhausted | None:
        limit = self.limits.micros_per_day
        if limit is None or estimate.micros == 0:
            return None
        day_from = _day_start(now_ms)
        spent = sum(
            self._by_key[key].counted.micros for at_ms, key in self._times if at_ms >= day_from
        )
        if spent + estimate.micros <= limit:
            return None
        return Exhausted(Measure.MONEY_PER_DAY, day_from + DAY_MS, spent, limit, estimate.micros)


def held_from_ms(now_ms: int) -> int:
    """The reservation time from which a claim may still hold a window at ``now_ms``:
    the start of today (money), or less than ``UNANSWERED_MS`` ago (tokens, a call
    not answered yet), whichever is earlier. Older claims count nowhere."""
    return min(now_ms - UNANSWERED_MS + 1, _day_start(now_ms))


def _day_start(ms: int) -> int:
    return ms - ms % DAY_MS
