"""What an agent instance shows Prometheus, read from its own counts at each scrape.

The runtime counts every outcome in ``AgentStats`` and every rate wait in
``FlowControl`` anyway; this maps those counts onto the families of
``sagalog.metrics``, so a record costs nothing more with metrics served.
"""

from __future__ import annotations

from collections.abc import Callable

from sagalog import metrics
from sagalog.agents.circuit_breaker import BreakerState
from sagalog.agents.connection import KafkaClients
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.telemetry import AgentStats

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
    *, agent: str, stats: AgentStats, flow: FlowControl, clients: KafkaClients
) -> Callable[[], None]:
    """Serve this instance's counts to Prometheus until the returned undo is called."""

    def records() -> metrics.Samples:
        return [((agent, label), getattr(stats, field)) for label, field in OUTCOME_COUNTS.items()]

    def breakers() -> metrics.Samples:
        return [
            ((agent, name), BREAKER_VALUES[breaker.state])
            for name, breaker in dict(flow.breakers).items()
        ]

    def lag() -> metrics.Samples:
        return [((agent, topic, str(p)), value) for (topic, p), value in clients.lag.items()]

    undo = [
        metrics.read(metrics.AGENT_RECORDS, records),
        metrics.read(metrics.DEAD_LETTERS, lambda: [((agent,), stats.dead_lettered)]),
        metrics.read(
            metrics.TRANSACTIONS,
            lambda: [
                ((agent, "committed"), stats.transactions),
                ((agent, "aborted"), stats.aborted),
            ],
        ),
        metrics.read(metrics.BREAKER_STATE, breakers),
        metrics.read(
            metrics.RATE_LIMIT_WAITS,
            lambda: [((agent, d), n) for d, n in dict(flow.rate_waits).items()],
        ),
        metrics.read(
            metrics.RATE_LIMIT_WAIT_SECONDS,
            lambda: [((agent, d), s) for d, s in dict(flow.rate_waited_s).items()],
        ),
        metrics.read(metrics.CONSUMER_LAG, lag),
    ]

    def stop() -> None:
        for remove in undo:
            remove()

    return stop
