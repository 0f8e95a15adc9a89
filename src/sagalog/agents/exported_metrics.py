"""What an agent instance shows Prometheus, read from its own counts at each scrape.

The runtime counts every outcome in ``AgentStats`` and every rate wait in
``FlowControl`` anyway; this maps those counts onto the families of
``sagalog.metrics``, so a record costs nothing more with metrics served.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sagalog import metrics
from sagalog.agents.circuit_breaker import BreakerState
from sagalog.agents.connection import KafkaClients
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.telemetry import AgentStats
from sagalog.budgets.book import BudgetBook

_USAGE = {"tokens_per_minute": "tokens", "micros_per_day": "micros"}
"""A budget limit, and the ``Usage`` field it holds."""

BREAKER_VALUES = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}

OUTCOME_COUNTS = {
    "handled": "handled",
    "retry": "retried",
    "defer": "deferred",
    "park": "parked",
    "dead_letter": "dead_lettered",
    "duplicate": "duplicates",
    "ignored": "ignored",
}
"""``sagalog_agent_records_total``'s outcome label, and the ``AgentStats`` field it reads."""


def export(
    *,
    lanes: Sequence[tuple[str, AgentStats, FlowControl, BudgetBook]],
    host: str,
    stats: AgentStats,
    clients: KafkaClients,
    wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
) -> Callable[[], None]:
    """Serve this instance's counts to Prometheus until the returned undo is called.

    Args:
        lanes: each agent's name, counts, flow control and budgets: its records, dead
            letters, breakers, rate waits and budget spend, labelled with its name.
        host: the name of the process's consumer and transactions (alone, the agent's).
        stats: the counts of the process's transactions.
        wall_ms: the time the budgets' windows are read at.
    """
    undo = [_export_lane(*lane, wall_ms=wall_ms) for lane in lanes]

    def lag() -> metrics.Samples:
        return [((host, topic, str(p)), value) for (topic, p), value in clients.lag.items()]

    undo += [
        metrics.read(
            metrics.TRANSACTIONS,
            lambda: [
                ((host, "committed"), stats.transactions),
                ((host, "aborted"), stats.aborted),
            ],
        ),
        metrics.read(metrics.CONSUMER_LAG, lag),
    ]

    def stop() -> None:
        for remove in undo:
            remove()

    return stop


def _export_lane(
    agent: str,
    stats: AgentStats,
    flow: FlowControl,
    budgets: BudgetBook,
    *,
    wall_ms: Callable[[], int],
) -> Callable[[], None]:
    def records() -> metrics.Samples:
        return [((agent, label), getattr(stats, field)) for label, field in OUTCOME_COUNTS.items()]

    def breakers() -> metrics.Samples:
        return [
            ((agent, name), BREAKER_VALUES[breaker.state])
            for name, breaker in dict(flow.breakers).items()
        ]

    def spend(measure: str) -> metrics.Samples:
        samples: list[tuple[tuple[str, ...], float]] = []
        for report in budgets.report(now_ms=wall_ms()):
            limit = getattr(report.limits, measure)
            kinds = {
                "settled": getattr(report.settled, _USAGE[measure]),
                "reserved": getattr(report.reserved, _USAGE[measure]),
            }
            if limit is not None:
                kinds["limit"] = limit
            samples += [((agent, report.ledger, k), v) for k, v in kinds.items()]
        return samples

    undo = [
        metrics.read(metrics.BUDGET_TOKENS, lambda: spend("tokens_per_minute")),
        metrics.read(metrics.BUDGET_MONEY, lambda: spend("micros_per_day")),
        metrics.read(metrics.AGENT_RECORDS, records),
        metrics.read(metrics.DEAD_LETTERS, lambda: [((agent,), stats.dead_lettered)]),
        metrics.read(metrics.BREAKER_STATE, breakers),
        metrics.read(
            metrics.RATE_LIMIT_WAITS,
            lambda: [((agent, d), n) for d, n in dict(flow.rate_waits).items()],
        ),
        metrics.read(
            metrics.RATE_LIMIT_WAIT_SECONDS,
            lambda: [((agent, d), s) for d, s in dict(flow.rate_waited_s).items()],
        ),
    ]

    def stop() -> None:
        for remove in undo:
            remove()

    return stop
