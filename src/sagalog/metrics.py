"""Every Prometheus metric a sagalog service exports, named once.

Operators see choreography through these: how many workflows move, where they wait,
what is dead-lettered, which dependency is down, how far each consumer is behind.
Each service serves them as Prometheus text on ``/metrics`` (the tracker and the
agents on their health port, ``health_server``; the gateway on its own app), and the
Grafana dashboard in ``deploy/grafana`` queries only names defined here (a test
holds it to that).

**Counts are read, not counted twice.** The agents (``AgentStats``) and the tracker
(its outcome counters) already count what they do, for their own tests and logs.
Rather than count every record a second time on the hot path, a ``Source`` reads
those counts when Prometheus scrapes (every 15 s or so), so an idle exporter costs
nothing per record. Only distributions, which cannot be read back later, are
observed as they happen: ``Histogram``\\ s, about a microsecond each.

**prometheus_client, not the OTel SDK's metrics.** The OTel Prometheus exporter runs
every add through the SDK's aggregation (several microseconds with attributes) and
renames metrics on the way out (dots to underscores, unit suffixes appended), so a
dashboard's names would not be the names in the code. Traces stay OpenTelemetry.

Names follow Prometheus conventions: the unit in the name, ``_total`` on counters
(prometheus_client adds it to a counter's name).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

disable_created_metrics()  # type: ignore[no-untyped-call]  # a _created gauge per series: noise

Kind = Literal["counter", "gauge"]
Samples = Iterable[tuple[tuple[str, ...], float]]
"""Label values (in the family's label order) and the value, one pair per series."""


@dataclass(frozen=True)
class Family:
    """A metric whose values a service reads from its own state at scrape time."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]

    @property
    def exported(self) -> str:
        """The name Prometheus sees (counters get ``_total``)."""
        return f"{self.name}_total" if self.kind == "counter" else self.name


# -- read at scrape time ---------------------------------------------------------------

TRANSITIONS = Family(
    "sagalog_transitions",
    "counter",
    "Workflow state transitions the tracker committed",
    ("flow", "version", "from_state", "to_state"),
)
AGENT_RECORDS = Family(
    "sagalog_agent_records",
    "counter",
    "Records an agent took, by outcome (handled, retry, defer, park, dead_letter, "
    "duplicate, ignored)",
    ("agent", "outcome"),
)
DEAD_LETTERS = Family(
    "sagalog_dead_letters", "counter", "Records sent to a dead-letter topic", ("service",)
)
TRANSACTIONS = Family(
    "sagalog_transactions",
    "counter",
    "Kafka transactions a service ended, by outcome (committed, aborted)",
    ("service", "outcome"),
)
BREAKER_STATE = Family(
    "sagalog_breaker_state",
    "gauge",
    "A dependency's circuit breaker: 0 closed, 1 half-open, 2 open",
    ("agent", "dependency"),
)
RATE_LIMIT_WAITS = Family(
    "sagalog_rate_limit_waits",
    "counter",
    "Calls that waited for a rate-limit slot of a dependency",
    ("agent", "dependency"),
)
RATE_LIMIT_WAIT_SECONDS = Family(
    "sagalog_rate_limit_wait_seconds",
    "counter",
    "Time calls spent waiting for a rate-limit slot of a dependency",
    ("agent", "dependency"),
)
CONSUMER_LAG = Family(
    "sagalog_consumer_lag_records",
    "gauge",
    "Records of an input partition not yet processed by this service",
    ("service", "topic", "partition"),
)
TRACKER_DECISIONS = Family(
    "sagalog_tracker_decisions",
    "counter",
    "Inputs the tracker decided, by outcome (applied, duplicate, parked, ignored, ...); "
    "a batch the broker aborted is decided, and counted, again",
    ("outcome",),
)
TRACKER_RECORD_READS = Family(
    "sagalog_tracker_record_reads",
    "counter",
    "Workflow records the tracker read, by where from: memory (a record its last "
    "batches committed) or tables (RocksDB). Many table reads under load: raise "
    "SAGALOG_TRACKER_RECORDS_KEPT",
    ("source",),
)
TRACKER_EARLY_WAKEUPS = Family(
    "sagalog_tracker_early_wakeups",
    "counter",
    "Wake-ups of a workflow's timer key that found no timer due (its earliest timer was "
    "cancelled and a later one stays; the key moved to that one). Against "
    "sagalog_tracker_decisions_total: what the one key per workflow costs in reads",
    (),
)
WORKFLOWS = Family(
    "sagalog_workflows",
    "gauge",
    "Workflows the gateway's read model holds, by state (in flight: the non-terminal ones)",
    ("state",),
)
LIVE_CONNECTIONS = Family(
    "sagalog_gateway_live_connections",
    "gauge",
    "The console's open live-update connections (server-sent events, one per open page)",
    (),
)
ROCKSDB_SIZE = Family(
    "sagalog_rocksdb_size_bytes",
    "gauge",
    "Bytes a service's RocksDB stores take on disk",
    ("service", "table"),
)
BUDGET_TOKENS = Family(
    "sagalog_budget_tokens",
    "gauge",
    "Tokens a budget holds on this agent instance over the last minute, by kind: "
    "settled (what the model reported), reserved (calls not answered yet), limit (this "
    "instance's share of the limit)",
    ("agent", "ledger", "kind"),
)
BUDGET_MONEY = Family(
    "sagalog_budget_money_micros",
    "gauge",
    "Money a budget holds on this agent instance today (UTC), in millionths of the "
    "currency, by kind: settled, reserved, limit (this instance's share)",
    ("agent", "ledger", "kind"),
)

FAMILIES = (
    TRANSITIONS,
    AGENT_RECORDS,
    DEAD_LETTERS,
    TRANSACTIONS,
    BREAKER_STATE,
    RATE_LIMIT_WAITS,
    RATE_LIMIT_WAIT_SECONDS,
    CONSUMER_LAG,
    TRACKER_DECISIONS,
    TRACKER_RECORD_READS,
    TRACKER_EARLY_WAKEUPS,
    WORKFLOWS,
    LIVE_CONNECTIONS,
    ROCKSDB_SIZE,
    BUDGET_TOKENS,
    BUDGET_MONEY,
)

# -- observed as they happen ------------------------------------------------------------

_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_STATE_SECONDS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 86400, 7 * 86400)

STEP_DURATION = Histogram(
    "sagalog_step_duration_seconds",
    "How long an agent's handler ran for one step",
    ("agent",),
    buckets=_SECONDS,
)
TIME_IN_STATE = Histogram(
    "sagalog_time_in_state_seconds",
    "How long a workflow stayed in a state, observed when it left it",
    ("flow", "version", "state"),
    buckets=_STATE_SECONDS,
)
TRACKER_BATCH_SECONDS = Histogram(
    "sagalog_tracker_batch_seconds",
    "Time the tracker took to decide, publish and commit one batch",
    buckets=_SECONDS,
)
TRACKER_BATCH_RECORDS = Histogram(
    "sagalog_tracker_batch_records",
    "Input records in one tracker batch",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000),
)
GATEWAY_REQUEST_SECONDS = Histogram(
    "sagalog_gateway_request_seconds",
    "Time the gateway took to answer a request, by route",
    ("method", "route"),
    buckets=_SECONDS,
)
HISTOGRAMS = (
    STEP_DURATION,
    TIME_IN_STATE,
    TRACKER_BATCH_SECONDS,
    TRACKER_BATCH_RECORDS,
    GATEWAY_REQUEST_SECONDS,
)
"""Histograms export ``_bucket``, ``_sum`` and ``_count`` series under these names."""


GATEWAY_REQUESTS = Counter(
    "sagalog_gateway_requests",
    "Requests the gateway answered, by route and status (decisions and webhooks included)",
    ("method", "route", "status"),
)
"""Counted as they come: the gateway keeps no count of its own to read."""
COUNTERS = (GATEWAY_REQUESTS,)


def exported_names() -> set[str]:
    """Every metric name the services export (histograms by their base name)."""
    names = {family.exported for family in FAMILIES}
    names |= {f"{counter._name}_total" for counter in COUNTERS}
    for histogram in HISTOGRAMS:
        base = histogram._name
        names |= {base, f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return names


# -- sources -----------------------------------------------------------------------------

Reader = Callable[[], Samples]


class _Sources(Collector):
    """The readers each running part of a process registered, merged per family.

    A reader that fails is skipped for that scrape (and its family then lacks its
    series): a scrape must never take the service down, nor hang on it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers: dict[Family, list[Reader]] = {}

    def add(self, family: Family, reader: Reader) -> Callable[[], None]:
        with self._lock:
            self._readers.setdefault(family, []).append(reader)

        def remove() -> None:
            with self._lock:
                readers = self._readers.get(family, [])
                if reader in readers:
                    readers.remove(reader)

        return remove

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            readers = {family: list(found) for family, found in self._readers.items() if found}
        for family, found in readers.items():
            metric = (
                CounterMetricFamily(family.name, family.help, labels=family.labels)
                if family.kind == "counter"
                else GaugeMetricFamily(family.name, family.help, labels=family.labels)
            )
            for reader in found:
                try:
                    samples = list(reader())
                except Exception:  # a part stopping as it is read: its series skip a scrape
                    continue
                for labels, value in samples:
                    metric.add_metric(list(labels), value)
            yield metric


_SOURCES = _Sources()
REGISTRY.register(_SOURCES)


def read(family: Family, reader: Reader) -> Callable[[], None]:
    """Export ``family``'s series from ``reader`` at every scrape; returns the undo.

    Thread-safe: scrapes run on the HTTP server's thread, so a reader should take a
    snapshot (``dict(...)``) of state its service changes, not iterate it live.
    """
    return _SOURCES.add(family, reader)


def render() -> tuple[bytes, str]:
    """The Prometheus text of every metric of this process, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
