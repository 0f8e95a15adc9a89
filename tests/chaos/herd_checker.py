"""The thundering herd, judged from the dependency's side: pure functions, no I/O.

Thousands of workflows stall on a dependency in an outage; it recovers. What the
agents promise (``sagalog.agents.flow_control``), seen from the dependency's own call
log (every call with its arrival time):

- **the global rate limit holds**: in any window of ``w`` seconds after the recovery
  the dependency gets at most what a token bucket of the configured rate admits,
  ``burst + rate * w`` (the instances' buckets together never hold more than the
  global rate's burst);
- **the breakers probe, the herd does not charge**: while the dependency is down,
  each instance sends about ``failure_threshold`` calls before its breaker opens,
  then at most ``half_open_probes`` calls per open period; once it is back, the
  first calls it sees are probes, and the rest follow at the limited rate;
- **high priority goes first**: high-priority workflows pass the dependency earlier
  than normal ones (median time after the recovery, and their share of the first
  passes).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """One call the dependency received, as its stand-in logged it."""

    at: float  # wall-clock seconds at arrival
    operation: str
    key: str
    status: int

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass(frozen=True)
class Pass:
    """A workflow's first successful call to the dependency (its stalled step's effect)."""

    workflow_id: str
    high: bool
    at: float


@dataclass(frozen=True)
class HerdLimits:
    """What the agents were configured with, so the checks know what to expect."""

    rate: float  # the global calls per second, across all instances
    burst_s: float = 1.0  # DependencyLimits' burst_seconds: the burst is rate * burst_s
    open_for_s: float = 10.0
    instances: int = 1
    failure_threshold: int = 5
    half_open_probes: int = 1
    windows_s: tuple[float, ...] = (1.0, 5.0, 10.0)
    slack: float = 0.1
    """A share of the rate allowed over the envelope: arrival times jitter with threads
    and HTTP; a window that catches a few calls early is not a broken limit."""
    min_high_share: float = 0.5
    """Of the first passes (as many as there are high-priority workflows), at least this
    share must be high-priority: ten times their share of the herd at 10% high."""

    @property
    def trip_calls(self) -> float:
        """The most calls the outage's first open period may hold: each instance's
        breaker opens at its ``failure_threshold``-th failure, and until those failures
        are back (a second, on a loaded machine) calls go at the limited rate."""
        return self.failure_threshold * self.instances + self.allowed(1.0)

    @property
    def burst(self) -> float:
        return max(1.0, self.rate * self.burst_s)

    def allowed(self, window_s: float) -> float:
        """The most calls a window of ``window_s`` may hold: the token bucket's envelope."""
        return self.burst + self.rate * window_s + max(2.0, self.slack * self.rate)


@dataclass
class HerdFigures:
    calls: int = 0
    calls_in_outage: int = 0
    trip_calls: int = 0
    """Calls in the outage's first open period: until the breakers opened."""
    probes_in_outage: int = 0
    """Calls during the outage once the breakers had tripped (one open period in)."""
    most_probes_per_open_period: int = 0
    calls_after_recovery: int = 0
    first_call_after_recovery_s: float | None = None
    first_success_after_recovery_s: float | None = None
    calls_before_first_success: int = 0
    first_seconds: list[int] = field(default_factory=list)
    """Calls in each of the first ten seconds after the recovery."""
    peak: dict[str, int] = field(default_factory=dict)
    """The most calls in any window of each length after the recovery, e.g. {"1s": 78}."""
    allowed: dict[str, float] = field(default_factory=dict)
    drain_rate: float | None = None
    """Passes per second after the recovery, from the first to the last."""
    passes: int = 0
    high: int = 0
    p50_high_s: float | None = None
    p50_normal_s: float | None = None
    p90_high_s: float | None = None
    p90_normal_s: float | None = None
    high_share_first: float | None = None
    """The share of high-priority workflows among the first ``high`` passes."""
    failures: list[str] = field(default_factory=list)

    def summary(self, rate: float) -> dict[str, Any]:
        """The row's figures: short, for the table and chaos-results.json."""
        return {
            "dependency_peak_1s": self.peak.get("1s"),
            "dependency_limit": rate,
            "dependency_allowed_1s": self.allowed.get("1s"),
            "drain_rate": self.drain_rate,
            "trip_calls": self.trip_calls,
            "p50_high_s": self.p50_high_s,
            "p50_normal_s": self.p50_normal_s,
            "high_share_first": self.high_share_first,
            "probes_in_outage": self.probes_in_outage,
            "first_seconds": self.first_seconds,
        }


def most_in_window(times: Iterable[float], window_s: float) -> int:
    """The most of ``times`` in any half-open window ``[t, t + window_s)`` (sliding)."""
    ordered = sorted(times)
    most = start = 0
    for end, at in enumerate(ordered):
        while ordered[start] <= at - window_s:
            start += 1
        most = max(most, end - start + 1)
    return most


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1], 2)


def judge_herd(
    calls: Sequence[Call],
    passes: Sequence[Pass],
    *,
    outage: tuple[float, float],
    limits: HerdLimits,
) -> HerdFigures:
    """Measure and judge one herd; ``failures`` says in words what broke.

    Args:
        calls: every call the dependency received, failed ones included.
        passes: each workflow's first successful call, with its priority.
        outage: (started, recovered) wall-clock seconds of the dependency's outage.
        limits: what the agents were configured with.
    """
    started, recovered = outage
    figures = HerdFigures(calls=len(calls))
    during = sorted(c.at for c in calls if started <= c.at < recovered)
    after = sorted((c for c in calls if c.at >= recovered), key=lambda c: c.at)
    after_times = [c.at for c in after]
    figures.calls_in_outage = len(during)
    figures.calls_after_recovery = len(after)

    # While down: once every breaker tripped (an open period after the first call),
    # each instance probes at most half_open_probes times per open period.
    if during:
        tripped = during[0] + limits.open_for_s
        probes = [t for t in during if t >= tripped]
        figures.trip_calls = len(during) - len(probes)
        if figures.trip_calls > limits.trip_calls:
            figures.failures.append(
                f"{figures.trip_calls} calls in the outage's first {limits.open_for_s:g}s; "
                f"{limits.instances} breaker(s) opening after {limits.failure_threshold} "
                f"failures and a second at the limited rate let at most "
                f"{limits.trip_calls:.0f} through"
            )
        figures.probes_in_outage = len(probes)
        figures.most_probes_per_open_period = most_in_window(probes, limits.open_for_s)
        allowed = limits.instances * limits.half_open_probes
        if figures.most_probes_per_open_period > allowed:
            figures.failures.append(
                f"{figures.most_probes_per_open_period} calls within one open period "
                f"({limits.open_for_s:g}s) of the outage, after the breakers tripped; "
                f"{limits.instances} instance(s) should probe at most {allowed}"
            )

    # Back up: probes first, then the herd at the limited rate.
    if after:
        figures.first_call_after_recovery_s = round(after[0].at - recovered, 3)
        first_ok = next((c for c in after if c.ok), None)
        if first_ok is not None:
            figures.first_success_after_recovery_s = round(first_ok.at - recovered, 3)
            figures.calls_before_first_success = sum(1 for c in after if c.at < first_ok.at)
        figures.first_seconds = [
            sum(1 for t in after_times if recovered + s <= t < recovered + s + 1) for s in range(10)
        ]
        for window in limits.windows_s:
            name = f"{window:g}s"
            figures.peak[name] = most_in_window(after_times, window)
            figures.allowed[name] = round(limits.allowed(window), 1)
            if figures.peak[name] > limits.allowed(window):
                figures.failures.append(
                    f"{figures.peak[name]} calls within {name} after the recovery; the "
                    f"limit of {limits.rate:g}/s with a burst of {limits.burst:g} allows "
                    f"{limits.allowed(window):.0f}"
                )
        if figures.calls_before_first_success > limits.instances * limits.half_open_probes:
            figures.failures.append(
                f"{figures.calls_before_first_success} calls before the first success after "
                "the recovery; the breakers should have sent only their probes"
            )
        if (figures.first_call_after_recovery_s or 0) > limits.open_for_s + 5:
            figures.failures.append(
                f"the first call after the recovery came {figures.first_call_after_recovery_s}s "
                f"later; a breaker half-opens after {limits.open_for_s:g}s"
            )
    else:
        figures.failures.append("the dependency got no call after it recovered")

    # Priority: who passed the dependency first.
    since = [p for p in passes if p.at >= recovered]
    figures.passes = len(since)
    high = sorted(p.at - recovered for p in since if p.high)
    normal = sorted(p.at - recovered for p in since if not p.high)
    figures.high = len(high)
    if len(since) > 1:
        span = max(p.at for p in since) - min(p.at for p in since)
        figures.drain_rate = round((len(since) - 1) / span, 1) if span > 0 else None
    figures.p50_high_s, figures.p50_normal_s = _percentile(high, 0.5), _percentile(normal, 0.5)
    figures.p90_high_s, figures.p90_normal_s = _percentile(high, 0.9), _percentile(normal, 0.9)
    if high and normal:
        first = sorted(since, key=lambda p: p.at)[: len(high)]
        figures.high_share_first = round(sum(p.high for p in first) / len(first), 3)
        assert figures.p50_high_s is not None and figures.p50_normal_s is not None
        if figures.p50_high_s >= figures.p50_normal_s:
            figures.failures.append(
                f"high-priority workflows passed the dependency no sooner than normal ones "
                f"(median {figures.p50_high_s}s vs {figures.p50_normal_s}s after the recovery)"
            )
        if figures.high_share_first < limits.min_high_share:
            figures.failures.append(
                f"only {figures.high_share_first:.0%} of the first {len(first)} passes were "
                f"high-priority (at least {limits.min_high_share:.0%} expected)"
            )
    elif passes:
        figures.failures.append(
            f"{len(since)} passes after the recovery, {len(high)} of them high-priority: "
            "nothing to compare"
        )
    return figures
