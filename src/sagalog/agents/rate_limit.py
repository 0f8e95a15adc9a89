"""Rate limits per dependency: a token bucket, and a global limit split by partition.

An agent calls rate-limited dependencies (a model provider, a payment API) whose
limit holds for the whole platform, not for one process. Every instance therefore
runs its own bucket at its share of the global rate, and the shares follow Kafka's
partition assignment (see ``partition_share``). Everything here is pure: time comes
from an injected clock, and nothing sleeps; the runtime asks ``wait_time`` and
schedules the wait itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction

from sagalog.errors import ConfigurationError

# Float clock readings lose precision as they grow, so ``last + wait_time()`` may
# read back a hair short of the wait. A caller that waited exactly ``wait_time()``
# must then get its token: a shortfall the bucket refills within a microsecond, or
# one below a billionth of a token, counts as none.
_CLOCK_SLACK_S = 1e-6
_TOKEN_SLACK = 1e-9


def _check_rate(rate_per_s: float, *, what: str) -> float:
    if not math.isfinite(rate_per_s) or rate_per_s < 0:
        raise ConfigurationError(
            f"{what}: rate {rate_per_s!r} per second; give a finite rate of 0 or more "
            "(leave a dependency out of the limits to make it unlimited)"
        )
    return float(rate_per_s)


class TokenBucket:
    """A token bucket: a sustained ``rate_per_s`` with bursts up to ``burst`` tokens.

    The bucket starts full unless ``start_empty``; ``DependencyLimits`` starts its
    buckets empty, because instances joining one after another would otherwise each
    spend a full burst at once, beyond the global limit. Not thread-safe: one per
    worker event loop, like the circuit breakers.

    Args:
        rate_per_s: tokens added per second; 0 admits nothing beyond what is left.
        burst: the most tokens the bucket holds, i.e. the largest burst it admits.
        clock: a monotonic clock in seconds (``time.monotonic`` in production, a
            fake advanced by the test in tests).

    Raises:
        ConfigurationError: the rate is negative or not finite, or the burst is not
            positive.
    """

    def __init__(
        self,
        rate_per_s: float,
        burst: float,
        clock: Callable[[], float],
        *,
        start_empty: bool = False,
    ) -> None:
        self._rate = _check_rate(rate_per_s, what="token bucket")
        self._burst = self._check_burst(burst)
        self._clock = clock
        self._tokens = 0.0 if start_empty else self._burst
        self._updated_at = clock()

    @staticmethod
    def _check_burst(burst: float) -> float:
        if not math.isfinite(burst) or burst <= 0:
            raise ConfigurationError(
                f"token bucket: burst {burst!r}; give a finite burst above 0 "
                "(at least 1 to admit single calls)"
            )
        return float(burst)

    @property
    def rate_per_s(self) -> float:
        """The sustained rate, as last set."""
        return self._rate

    @property
    def burst(self) -> float:
        """The bucket's capacity, as last set."""
        return self._burst

    def available(self) -> float:
        """The tokens in the bucket now (for metrics; may be fractional, and negative
        while reserved tokens are owed)."""
        self._refill()
        return self._tokens

    def try_acquire(self, n: float = 1) -> bool:
        """Take ``n`` tokens if they are there now; take nothing otherwise.

        Raises:
            ConfigurationError: ``n`` is not positive or exceeds the burst, so it
                could never be granted and waiting for it would never end.
        """
        self._check_request(n)
        self._refill()
        if self._wait_for(n) > 0:
            return False
        self._tokens -= n
        return True

    def reserve(self, n: float = 1, *, max_wait_s: float = math.inf) -> float | None:
        """Take ``n`` tokens now, on credit if need be; return how long to wait before use.

        Unlike ``try_acquire`` in a loop, a reservation queues: tokens promised to
        earlier callers are owed (the count goes below zero) and count in every later
        caller's wait, so concurrent callers wait 1/rate, 2/rate, ... in turn instead
        of each being told "one refill away" and racing for it, however many they are.

        Returns:
            The seconds to wait before making the call (0 if the tokens are there);
            None, taking nothing, when that wait would exceed ``max_wait_s`` or never
            end (rate 0).

        Raises:
            ConfigurationError: ``n`` is not positive or exceeds the burst.
        """
        self._check_request(n)
        self._refill()
        wait = self._wait_for(n)
        if wait > max_wait_s or math.isinf(wait):
            return None
        self._tokens -= n
        return wait

    def wait_time(self, n: float = 1) -> float:
        """Seconds until ``n`` tokens are available: 0 if now, ``math.inf`` at rate 0.

        The answer assumes no one else takes tokens meanwhile; the caller waits, then
        calls ``try_acquire`` and asks again if it lost the race.

        Raises:
            ConfigurationError: ``n`` is not positive or exceeds the burst.
        """
        self._check_request(n)
        self._refill()
        return self._wait_for(n)

    def set_rate(
        self, rate_per_s: float, *, burst: float | None = None, empty: bool = False
    ) -> None:
        """Change the rate (and optionally the burst) from now on.

        Tokens earned so far are counted at the old rate before the change, so a
        higher rate is never applied retroactively to the time since the last
        refill; and the count is cut to the (new) burst, so an instance whose share
        shrank cannot spend a capacity it no longer has. ``empty`` drops the tokens
        held (tokens owed stay owed): for a share that starts afresh.

        Raises:
            ConfigurationError: the rate or the burst is invalid.
        """
        rate = _check_rate(rate_per_s, what="token bucket")
        new_burst = self._burst if burst is None else self._check_burst(burst)
        self._refill()
        self._rate = rate
        self._burst = new_burst
        self._tokens = min(self._tokens, 0.0 if empty else self._burst)

    def _check_request(self, n: float) -> None:
        if not n > 0 or n > self._burst:
            raise ConfigurationError(
                f"token bucket: a request for {n!r} tokens with burst {self._burst}; "
                "ask for more than 0 and at most the burst (raise the burst or split the call)"
            )

    def _refill(self) -> None:
        now = self._clock()
        if now > self._updated_at:  # a clock that steps back refills nothing
            self._tokens = min(self._burst, self._tokens + (now - self._updated_at) * self._rate)
            self._updated_at = now

    def _wait_for(self, n: float) -> float:
        missing = n - self._tokens
        if missing <= _TOKEN_SLACK:
            return 0.0
        if self._rate == 0:
            return math.inf
        wait = missing / self._rate
        return 0.0 if wait <= _CLOCK_SLACK_S else wait


def _check_assignment(*, assigned: int, total: int) -> None:
    if total <= 0:
        raise ConfigurationError(
            f"partition share: total={total} partitions; pass the partition count of the "
            "topics the group consumes, which is at least 1"
        )
    if not 0 <= assigned <= total:
        raise ConfigurationError(
            f"partition share: assigned={assigned} of total={total} partitions; an "
            "instance holds between 0 and all of them (is total the whole topic's count?)"
        )


def partition_share(*, global_rate: float, assigned: int, total: int) -> float:
    """The part of a platform-wide rate limit that one instance may use.

    A dependency's limit holds across every instance of an agent, yet the instances
    need no coordination service (no Redis, no lease) to share it: Kafka's group
    assignment already splits the work, since each partition belongs to exactly one
    member of the consumer group. An instance holding ``assigned`` of the ``total``
    partitions handles that fraction of the workflows, so it gets that fraction of
    the rate, and the shares of all instances add up to ``global_rate``. Shares are
    recomputed on every rebalance: lowered when partitions are revoked, raised when
    they are assigned, so that even mid-rebalance the sum stays at or below the
    limit. Each share is rounded down, never to the nearest float, so the shares
    never add up to a hair more than the limit either.

    The trade-off: the split assumes partitions carry equal load. When keys are
    skewed, an instance with quiet partitions leaves part of its share unused while
    a busy one waits, so the platform may run below the limit; it never runs above
    it. That is the safe side for a limit enforced by someone else, and the cost of
    needing no shared counter.

    Args:
        global_rate: the dependency's limit for the whole platform, per second.
        assigned: partitions this instance holds now.
        total: partitions of the consumed topics, across the whole group.

    Returns:
        ``global_rate * assigned / total`` rounded down; 0 when nothing is assigned.

    Raises:
        ConfigurationError: ``total`` is not positive, ``assigned`` is outside
            ``0..total``, or the rate is negative or not finite.
    """
    _check_assignment(assigned=assigned, total=total)
    rate = _check_rate(global_rate, what="partition share")
    if assigned == 0:
        return 0.0
    exact = Fraction(rate) * assigned / total
    share = float(exact)
    return share if Fraction(share) <= exact else math.nextafter(share, 0.0)


class DependencyLimits:
    """One token bucket per rate-limited dependency, sized to this instance's share.

    Until the first ``rebalance`` each bucket runs at the full global rate, the
    single-instance case. Call ``rebalance`` from the consumer's assignment and
    revocation callbacks, before the first record is handled, so that several
    instances starting together do not each spend a whole platform's burst. A share
    that starts afresh (the first rebalance, or one after holding no partition)
    starts with an empty bucket: what it earned meanwhile, at the full rate before
    the first assignment or while it held nothing, is not this instance's to spend,
    since the instances that did hold the partitions spent the platform's rate.

    Args:
        global_rates: dependency name -> platform-wide limit in calls per second.
            A dependency not named here is unlimited.
        clock: a monotonic clock in seconds, shared by all buckets.
        burst_seconds: how many seconds of a bucket's rate it may spend at once. The
            burst is at least one call, so a tiny share still admits single calls;
            that floor is the only way the instances together can exceed the global
            limit, by at most one call each.

    Raises:
        ConfigurationError: a rate is negative or not finite, or ``burst_seconds``
            is not positive.
    """

    def __init__(
        self,
        global_rates: Mapping[str, float],
        *,
        clock: Callable[[], float],
        burst_seconds: float = 1.0,
    ) -> None:
        if not math.isfinite(burst_seconds) or burst_seconds <= 0:
            raise ConfigurationError(
                f"dependency limits: burst_seconds={burst_seconds!r}; give a finite "
                "number of seconds above 0"
            )
        self._burst_seconds = float(burst_seconds)
        self._global_rates = {
            name: _check_rate(rate, what=f"dependency limit {name!r}")
            for name, rate in global_rates.items()
        }
        self._buckets = {
            name: TokenBucket(rate, self._burst_for(rate), clock, start_empty=True)
            for name, rate in self._global_rates.items()
        }
        # The same bucket again, charged when each call goes rather than when its slot
        # is reserved (``take_made``).
        self._made = {
            name: TokenBucket(rate, self._burst_for(rate), clock, start_empty=True)
            for name, rate in self._global_rates.items()
        }
        self._held = 0  # partitions held at the last rebalance; none before the first

    def _burst_for(self, rate_per_s: float) -> float:
        return max(1.0, rate_per_s * self._burst_seconds)

    def rebalance(self, assigned: int, total: int) -> None:
        """Set every bucket to this instance's share after a partition rebalance.

        Raises:
            ConfigurationError: ``total`` is not positive or ``assigned`` is outside
                ``0..total``; no bucket is changed then.
        """
        _check_assignment(assigned=assigned, total=total)
        afresh = not self._held
        for name, bucket in self._buckets.items():
            share = partition_share(
                global_rate=self._global_rates[name], assigned=assigned, total=total
            )
            bucket.set_rate(share, burst=self._burst_for(share), empty=afresh)
            self._made[name].set_rate(share, burst=self._burst_for(share), empty=afresh)
        self._held = assigned

    def rate(self, dependency: str) -> float:
        """This instance's current rate for ``dependency``; ``math.inf`` if unlimited."""
        bucket = self._buckets.get(dependency)
        return math.inf if bucket is None else bucket.rate_per_s

    def wait_time(self, dependency: str) -> float:
        """Seconds until one call to ``dependency`` may go; 0 now or if unlimited."""
        bucket = self._buckets.get(dependency)
        return 0.0 if bucket is None else bucket.wait_time()

    def reserve(self, dependency: str, *, max_wait_s: float = math.inf) -> float | None:
        """Reserve one call's token (see ``TokenBucket.reserve``); 0.0 if unlimited."""
        bucket = self._buckets.get(dependency)
        return 0.0 if bucket is None else bucket.reserve(max_wait_s=max_wait_s)

    def take_made(self, dependency: str) -> float:
        """Count one call to ``dependency`` as it goes: 0.0 when the bucket of calls as
        made has its token (taken), else the seconds until it will (nothing taken).

        A reserved slot names a time; a call woken past it (the loop was busy) would go
        with every other call planned meanwhile, all at once. Charged again at the
        moment they go, against a bucket of the same rate and burst, the calls made keep
        to the limit whatever the loop did: after a stall, up to a burst go at once
        (what the bucket earned while nobody called), the rest at the rate. On time, a
        call always finds its token: the reservations follow the same bucket.
        """
        bucket = self._made.get(dependency)
        if bucket is None or bucket.try_acquire():
            return 0.0
        return bucket.wait_time()

    def try_acquire(self, dependency: str) -> bool:
        """Take one call's token for ``dependency`` if there is one; always True if unlimited."""
        bucket = self._buckets.get(dependency)
        return True if bucket is None else bucket.try_acquire()
