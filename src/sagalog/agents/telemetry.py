"""Traces, counts and structured logs of an agent, with one fixed log schema.

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
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sagalog.metrics import STEP_DURATION
from sagalog.tracing import records_spans

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
    "error",
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
        if record.exc_info:  # ``log.exception``: the cause and where, or the line says nothing
            line["error"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["error"] = self.formatStack(record.stack_info)
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
    closers: int = 0
    """Records written to end a transaction left open on an input (``open_transactions``)."""
    rebuilt: int = 0
    """Times the consumer and producer were closed and built anew in-process (an outage)."""


class AgentTelemetry:
    """Spans, metrics and log lines of one agent instance."""

    def __init__(self, *, agent: str, instance: str) -> None:
        self.agent = agent
        self.instance = instance
        self.logger = logging.getLogger(f"sagalog.agent.{agent}")
        self.tracer = trace.get_tracer("sagalog.agent")
        self.stats = AgentStats()
        """The counts; Prometheus reads them when it scrapes (``agents.exported``)."""
        self.step_seconds = STEP_DURATION.labels(agent)
        """Handler time per step, observed as it happens (a distribution is not read back)."""

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

    def span(
        self, name: str, *, traceparent: str | None, attributes: dict[str, Any]
    ) -> AbstractContextManager[Span]:
        """The current span while a handler runs: a child of ``traceparent``.

        When no span processor is installed (an SDK provider with no exporter, the
        default), nobody will ever see the span, and the SDK would still build and
        time a recording one; only its context matters, for the outputs'
        ``traceparent`` and any call the handler makes. Then an unrecorded span with
        the context the SDK would have given it stands in, at a fraction of the cost.
        """
        provider = trace.get_tracer_provider()
        if not records_spans(provider):
            assert isinstance(provider, TracerProvider)
            parent = _propagator.extract({"traceparent": traceparent}) if traceparent else None
            return _UnrecordedSpan(
                _child_context(provider, parent, name, attributes), parent=parent
            )
        return self._recorded_span(name, traceparent=traceparent, attributes=attributes)

    @contextmanager
    def _recorded_span(
        self, name: str, *, traceparent: str | None, attributes: dict[str, Any]
    ) -> Iterator[Span]:
        parent = _propagator.extract({"traceparent": traceparent}) if traceparent else None
        with self.tracer.start_as_current_span(
            name, context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        ) as span:
            yield span


def _child_context(
    provider: TracerProvider,
    parent: otel_context.Context | None,
    name: str,
    attributes: dict[str, Any],
) -> SpanContext:
    """The span context ``Tracer.start_span`` would give a consumer span under
    ``parent``: the parent's trace (or a new one), a new span id, and the provider's
    sampler's decision as the sampled flag that travels on."""
    parent_context = trace.get_current_span(parent).get_span_context()
    if parent_context.is_valid:
        trace_id = parent_context.trace_id
        random_trace_id = parent_context.trace_flags.random_trace_id
    else:
        trace_id = provider.id_generator.generate_trace_id()
        random_trace_id = provider.id_generator.is_trace_id_random()
    sampling = provider.sampler.should_sample(
        parent, trace_id, name, SpanKind.CONSUMER, attributes, ()
    )
    sampled = sampling.decision is Decision.RECORD_AND_SAMPLE  # Decision.is_sampled()
    flags = TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT
    if random_trace_id:
        flags |= TraceFlags.RANDOM_TRACE_ID
    return SpanContext(
        trace_id,
        provider.id_generator.generate_span_id(),
        is_remote=False,
        trace_flags=TraceFlags(flags),
        trace_state=sampling.trace_state,
    )


class _UnrecordedSpan:
    """Makes a span context current for a block, as ``start_as_current_span`` does."""

    __slots__ = ("_parent", "_span", "_token")

    def __init__(self, span_context: SpanContext, *, parent: otel_context.Context | None) -> None:
        self._span = NonRecordingSpan(span_context)
        self._parent = parent

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span, self._parent))
        return self._span

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        otel_context.detach(self._token)


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, to stamp on output events."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent")
