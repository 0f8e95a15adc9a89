"""What an agent instance shows Prometheus, read from its own counts at each scrape.

The runtime counts every outcome in ``AgentStats`` and every rate wait in
``FlowControl`` anyway; this maps those counts onto the families of
``sagalog.metrics``, so a record costs nothing more with metrics served.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
    *,
    lanes: Sequence[tuple[str, AgentStats, FlowControl]],
    host: str,
    stats: AgentStats,
    clients: KafkaClients,
) -> Callable[[], None]:
    """Serve this instance's counts to Prometheus until the returned undo is called.

    Args:
        lanes: each agent's name, counts and flow control: its records, dead letters,
            breakers and rate waits, labelled with its name.
        host: the name of the process's consumer and transactions (alone, the agent's).
        stats: the counts of the process's transactions.
    """
    undo = [_export_lane(*lane) for lane in lanes]

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


def _export_lane(agent: str, stats: AgentStats, flow: FlowControl) -> Callable[[], None]:
    def records() -> metrics.Samples:
        return [((agent, label), getattr(stats, field)) for label, field in OUTCOME_COUNTS.items()]

    def breakers() -> metrics.Samples:
        return [
            ((agent, name), BREAKER_VALUES[breaker.state])
            for name, breaker in dict(flow.breakers).items()
        ]

    undo = [
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
