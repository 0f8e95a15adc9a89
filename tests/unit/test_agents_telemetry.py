"""The handler span: near free when nothing records it, with the context the SDK gives."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sagalog.agents.telemetry import (
    _child_context,
    _UnrecordedSpan,
    current_traceparent,
)
from sagalog.tracing import records_spans

SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
NOT_SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


def test_only_an_sdk_provider_without_processors_records_nothing() -> None:
    bare = TracerProvider(shutdown_on_exit=False)
    assert not records_spans(bare)
    exporting = TracerProvider(shutdown_on_exit=False)
    exporting.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    assert records_spans(exporting)


@pytest.mark.parametrize("traceparent", [SAMPLED, NOT_SAMPLED, None])
def test_the_unrecorded_span_has_the_context_the_sdk_would_give(traceparent: str | None) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    propagator = TraceContextTextMapPropagator()
    parent = propagator.extract({"traceparent": traceparent}) if traceparent else None
    sdk = (
        provider.get_tracer("t")
        .start_span("handle", context=parent, kind=SpanKind.CONSUMER)
        .get_span_context()
    )
    ours = _child_context(provider, parent, "handle", {})
    assert ours.trace_flags == sdk.trace_flags
    assert ours.trace_state == sdk.trace_state
    assert ours.span_id != 0 and not ours.is_remote
    if traceparent:
        assert format_trace_id(ours.trace_id) == traceparent.split("-")[1]
        with _UnrecordedSpan(ours, parent=parent):
            outgoing = current_traceparent()
        assert outgoing is not None
        _, trace_id, span_id, flags = outgoing.split("-")
        assert trace_id == traceparent.split("-")[1]  # the same trace, carried on
        assert span_id not in (traceparent.split("-")[2], "0" * 16)  # a child span
        assert flags == traceparent.split("-")[3]
    assert current_traceparent() is None  # the block's context is gone after it


def test_a_json_log_line_keeps_the_cause_of_an_exception() -> None:
    """``log.exception("the read model follower stopped")`` once logged no cause at all."""
    import json
    import logging
    import sys

    from sagalog.agents.telemetry import LOG_FIELDS, JsonLineFormatter

    try:
        raise ConnectionError("broker 127.0.0.1:9092 went away")
    except ConnectionError:
        record = logging.LogRecord(
            "sagalog.gateway",
            logging.ERROR,
            __file__,
            1,
            "the follower stopped",
            (),
            sys.exc_info(),
        )
    line = json.loads(JsonLineFormatter().format(record))
    assert set(line) == set(LOG_FIELDS)  # one fixed schema, the error included
    assert "ConnectionError: broker 127.0.0.1:9092 went away" in line["error"]
    assert "Traceback" in line["error"]
    plain = logging.LogRecord("sagalog", logging.INFO, __file__, 1, "fine", (), None)
    assert json.loads(JsonLineFormatter().format(plain))["error"] is None
