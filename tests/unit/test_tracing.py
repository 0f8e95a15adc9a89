"""One trace per workflow: when spans are exported (``sagalog.tracing``), and how the
tracker passes a workflow's trace context on, to its events and its timers."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

from sagalog.events import CompensationRequested, StateTransition
from sagalog.tracing import TracingSettings, child_traceparent

from .test_tracker_processor import (
    CLASSIFIED,
    MIN,
    RESERVED,
    SUBMITTED,
    T0,
    TOPIC,
    Lab,
    applied,
    lab,
    registry,
)

__all__ = ["lab", "registry"]  # the processor tests' fixtures, used here too

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("env", "exporting"),
    [
        ({}, False),  # off by default, unlike the SDK's autoconfiguration
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, False),
        ({"OTEL_TRACES_EXPORTER": "console,otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_spans_are_exported_only_when_the_standard_variables_ask(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], exporting: bool
) -> None:
    for name in (
        "OTEL_TRACES_EXPORTER",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SDK_DISABLED",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert TracingSettings().exporting is exporting


def test_a_child_span_continues_the_parent_s_trace_and_names_itself_on_the_event() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    child = child_traceparent(tracer, "saga-tracker X", PARENT, attributes={"a": 1}, recording=True)
    [span] = exporter.get_finished_spans()
    assert (
        child
        == f"00-{format_trace_id(span.context.trace_id)}-{format_span_id(span.context.span_id)}-01"
    )
    assert format_trace_id(span.context.trace_id) == PARENT.split("-")[1]
    assert span.parent is not None and format_span_id(span.parent.span_id) == PARENT.split("-")[2]
    assert span.name == "saga-tracker X" and span.attributes == {"a": 1}


def test_with_nothing_recording_the_parent_passes_through_unchanged() -> None:
    tracer = TracerProvider(shutdown_on_exit=False).get_tracer("test")
    assert child_traceparent(tracer, "x", PARENT, attributes={}, recording=False) == PARENT
    assert child_traceparent(tracer, "x", None, attributes={}, recording=False) is None


def test_the_tracker_passes_an_event_s_trace_on_and_its_timers_keep_the_workflow_s(
    lab: Lab,
) -> None:
    event = lab.event(SUBMITTED, "wf-1", "e1").model_copy(update={"traceparent": PARENT})
    applied(lab.processor.handle(lab.batch, 0, event, now_ms=lab.now_ms, topic=TOPIC))
    assert lab.sink.published, "the start publishes its transitions"
    assert {p.traceparent for p in lab.sink.published} == {PARENT}
    lab.commit()
    assert lab.stored("wf-1").traceparent == PARENT
    published = len(lab.sink.published)
    assert lab.processor.fire_due(lab.batch, 0, now_ms=T0 + 10 * MIN, limit=10) == 1
    fired = lab.sink.published[published:]
    assert any(isinstance(p.event, CompensationRequested) for p in fired)
    assert any(isinstance(p.event, StateTransition) for p in fired)
    assert {p.traceparent for p in fired} == {PARENT}  # a timer continues the workflow's
    assert all(p.headers().traceparent == PARENT for p in fired)


def test_the_trace_id_is_read_from_a_traceparent_and_nothing_else() -> None:
    from sagalog.contracts.headers import trace_id_of

    assert trace_id_of(PARENT) == "0af7651916cd43dd8448eb211c80319c"
    assert trace_id_of(None) is None
    assert trace_id_of("garbage") is None


def test_an_event_of_another_trace_does_not_move_the_workflow_to_it(lab: Lab) -> None:
    """A tool or a caller that publishes inside its own trace (``sagalog publish`` for an
    existing workflow): the workflow stays one trace, and the answer continues it."""
    other = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    same = f"00-{PARENT.split('-')[1]}-1111111111111111-01"
    first = lab.event(SUBMITTED, "wf-1", "e1").model_copy(update={"traceparent": PARENT})
    applied(lab.processor.handle(lab.batch, 0, first, now_ms=lab.now_ms, topic=TOPIC))
    published = len(lab.sink.published)
    foreign = lab.event(RESERVED, "wf-1", "e2").model_copy(update={"traceparent": other})
    applied(lab.processor.handle(lab.batch, 0, foreign, now_ms=lab.now_ms, topic=TOPIC))
    assert lab.seen("wf-1").traceparent == PARENT
    assert {p.traceparent for p in lab.sink.published[published:]} == {PARENT}
    published = len(lab.sink.published)
    own = lab.event(CLASSIFIED, "wf-1", "e3").model_copy(update={"traceparent": same})
    applied(lab.processor.handle(lab.batch, 0, own, now_ms=lab.now_ms, topic=TOPIC))
    assert lab.seen("wf-1").traceparent == same  # the same trace, a later span: followed
    assert {p.traceparent for p in lab.sink.published[published:]} == {same}
