"""Where spans go: to an OTLP receiver when the standard ``OTEL_*`` variables ask for it,
else nowhere, at no cost.

A workflow is one trace, whatever process touches it: every event carries a W3C
``traceparent``; each service that acts on an event continues its trace and stamps its
own span's context on what it publishes (agents per handled event, the tracker per
event it publishes, the gateway per decision, cancellation or webhook). With export
off, nothing is recorded and each service passes the context it read on unchanged,
so the trace id still follows the workflow for whoever exports.

Export is on when ``OTEL_TRACES_EXPORTER`` is ``otlp``, or an OTLP endpoint is set
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), unless
``OTEL_SDK_DISABLED`` is true. Unlike the SDK's autoconfiguration, an unset exporter
means off: a service deployed without a collector must not retry exports forever.
Spans go over OTLP/HTTP with protobuf (port 4318 by default), which every collector
accepts; the exporter reads its endpoint, headers, certificate and timeout from the
same standard variables. ``OTEL_SERVICE_NAME`` names the service (default: its role).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic_settings import BaseSettings, SettingsConfigDict

_propagator = TraceContextTextMapPropagator()


class TracingSettings(BaseSettings):
    """The standard OpenTelemetry variables sagalog reads (``OTEL_`` prefix)."""

    model_config = SettingsConfigDict(env_prefix="OTEL_", extra="ignore")

    sdk_disabled: bool = False
    traces_exporter: str | None = None
    exporter_otlp_endpoint: str | None = None
    exporter_otlp_traces_endpoint: str | None = None
    service_name: str | None = None

    @property
    def exporting(self) -> bool:
        """Whether spans are exported (see the module docstring)."""
        if self.sdk_disabled:
            return False
        if self.traces_exporter is not None:  # said explicitly: "otlp", or "none"
            return "otlp" in {e.strip().lower() for e in self.traces_exporter.split(",")}
        return bool(self.exporter_otlp_traces_endpoint or self.exporter_otlp_endpoint)


def configure_tracing(role: str, settings: TracingSettings | None = None) -> bool:
    """Install this process's tracer provider, exporting over OTLP when asked; whether
    it exports. Once per process: a provider already installed is kept."""
    settings = settings or TracingSettings()
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return records_spans()
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: settings.service_name or role})
    )
    if settings.exporting:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return settings.exporting


def records_spans(provider: Any = None) -> bool:
    """Whether spans of ``provider`` (the global one by default) reach a processor, hence
    an exporter. Reads the SDK's processor list (private, hence the defensive reads):
    an unknown shape counts as recording, which only costs the SDK's own path."""
    provider = provider if provider is not None else trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider) or getattr(provider, "_disabled", True):
        return True
    processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", ())
    return not (isinstance(processors, tuple) and not processors)


def child_traceparent(
    tracer: trace.Tracer,
    name: str,
    parent: str | None,
    *,
    attributes: dict[str, Any],
    kind: SpanKind = SpanKind.PRODUCER,
    recording: bool | None = None,
) -> str | None:
    """Record a span ``name`` under ``parent`` (a W3C traceparent; None starts a trace),
    ended at once, and return its traceparent to stamp on the event it stands for.

    When nothing records spans, ``parent`` is returned unchanged: the workflow's trace
    goes on through this service at the cost of a header copy. ``recording``: whether
    ``tracer`` records (default: whether the global provider does).
    """
    if not (records_spans() if recording is None else recording):
        return parent
    context = _propagator.extract({"traceparent": parent}) if parent else None
    span = tracer.start_span(name, context=context, kind=kind, attributes=attributes)
    span.end()
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent", parent)


def starting_traceparent(tracer: trace.Tracer, name: str, *, attributes: dict[str, Any]) -> str:
    """The trace context for an event a program publishes of its own accord (a request
    that starts a workflow): a span of the caller's current trace, or of a new trace,
    when spans are exported; else the current context, or a new trace's.

    So a workflow is one trace from its first event: the agents and the tracker that
    answer the same request continue this context instead of each starting its own.
    """
    current: dict[str, str] = {}
    _propagator.inject(current)
    traced = child_traceparent(tracer, name, current.get("traceparent"), attributes=attributes)
    if traced is not None:
        return traced
    ids = RandomIdGenerator()
    return f"00-{ids.generate_trace_id():032x}-{ids.generate_span_id():016x}-01"
