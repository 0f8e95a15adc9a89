"""Traces, metrics and structured logs of an agent, with one fixed log schema.

Every meaningful action (handled, retried, deferred, dead-lettered, duplicate,
breaker change, rebalance) is one JSON line with the same keys, so a log pipeline
can index them without per-message parsing rules. Spans continue the producer's
trace through the ``traceparent`` header; output events carry the handler span's
context onward.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

LOG_FIELDS = (
    "ts",
    "level",
    "agent",
    "instance",
    "action",
    "workflow_id",
    "step",
    "event_type",
    "event_id",
    "transition",
    "duration_ms",
    "outcome",
    "attempt",
    "message",
)

_propagator = TraceContextTextMapPropagator()


class JsonLineFormatter(logging.Formatter):
    """Render a record as one JSON object with exactly ``LOG_FIELDS`` keys."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "sagalog", {})
        line = {key: fields.get(key) for key in LOG_FIELDS}
        line["ts"] = dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat()
        line["level"] = record.levelname.lower()
        line["message"] = record.getMessage()
        return json.dumps(line, default=str)


def configure_logging(*, json_lines: bool, level: str = "INFO") -> None:
    """Send ``sagalog`` logs to stderr, as JSON lines or plain text."""
    logger = logging.getLogger("sagalog")
    logger.setLevel(level.upper())
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonLineFormatter()
        if json_lines
        else logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    )
    logger.addHandler(handler)
    logger.propagate = False


def ensure_tracer_provider() -> None:
    """Install an SDK tracer provider if the application has not, so spans get real
    ids and propagate; exporters are the application's choice (OTel SDK config)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())


@dataclass
class AgentStats:
    """Counters of one worker, readable by tests and reports."""

    handled: int = 0
    failed: int = 0
    retried: int = 0
    deferred: int = 0
    parked: int = 0
    dead_lettered: int = 0
    duplicates: int = 0
    ignored: int = 0
    transactions: int = 0
    aborted: int = 0


class AgentTelemetry:
    """Spans, metrics and log lines of one agent instance."""

    def __init__(self, *, agent: str, instance: str) -> None:
        self.agent = agent
        self.instance = instance
        self.logger = logging.getLogger(f"sagalog.agent.{agent}")
        self.tracer = trace.get_tracer("sagalog.agent")
        meter = metrics.get_meter("sagalog.agent")
        self.attributes = {"agent": agent}
        self.handled = meter.create_counter("sagalog.agent.handled", description="Events handled")
        self.failed = meter.create_counter("sagalog.agent.failed", description="Failed attempts")
        self.retried = meter.create_counter(
            "sagalog.agent.retried", description="Retries scheduled"
        )
        self.dead_lettered = meter.create_counter(
            "sagalog.agent.dead_lettered", description="Records dead-lettered"
        )
        self.latency = meter.create_histogram(
            "sagalog.agent.handler_duration", unit="ms", description="Handler latency"
        )
        self.stats = AgentStats()

    def count(self, name: str, outcome: str | None = None) -> None:
        counter = getattr(self, name)
        counter.add(1, {**self.attributes, **({"outcome": outcome} if outcome else {})})

    def log(self, action: str, message: str, *, level: int = logging.INFO, **fields: Any) -> None:
        self.logger.log(
            level,
            message,
            extra={
                "sagalog": {
                    "agent": self.agent,
                    "instance": self.instance,
                    "action": action,
                    **fields,
                }
            },
        )

    @contextmanager
    def span(
        self, name: str, *, traceparent: str | None, attributes: dict[str, Any]
    ) -> Iterator[Span]:
        parent = _propagator.extract({"traceparent": traceparent}) if traceparent else None
        with self.tracer.start_as_current_span(
            name, context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        ) as span:
            yield span


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, to stamp on output events."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent")
