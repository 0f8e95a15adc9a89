"""Event metadata as Kafka headers, following the CloudEvents Kafka protocol binding.

The payload is Avro; everything a router needs rides in headers (binary content
mode), so an agent can skip an event it does not handle, or a tracker can order
and deduplicate it, without decoding the body. Extension attributes follow the
CloudEvents naming rule (lower-case letters and digits only) and carry the saga's
own identity: the workflow, the event that caused this one, the correlation id
shared by a whole business transaction, and the flow version it runs under. The
W3C ``traceparent``/``tracestate`` headers are carried as-is so OpenTelemetry
propagators read them without a sagalog-specific mapping.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sagalog.errors import EventValidationError

SPEC_VERSION = "1.0"
CONTENT_TYPE = "application/avro"

H_SPECVERSION = "ce_specversion"
H_ID = "ce_id"
H_SOURCE = "ce_source"
H_TYPE = "ce_type"
H_TIME = "ce_time"
H_CONTENT_TYPE = "content-type"
H_WORKFLOW_ID = "ce_workflowid"
H_CAUSATION_ID = "ce_causationid"
H_CORRELATION_ID = "ce_correlationid"
H_FLOW_VERSION = "ce_flowversion"
H_PRIORITY = "ce_priority"
H_TRACEPARENT = "traceparent"
H_TRACESTATE = "tracestate"
H_HASH = "sagalog_hash"
H_PREV_HASH = "sagalog_prev_hash"
H_CHAIN = "sagalog_chain"

_REQUIRED = (H_ID, H_SOURCE, H_TYPE, H_TIME, H_WORKFLOW_ID)

RawHeaders = Iterable[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None] | None


_ID_PREFIX = [uuid.uuid4().int >> 64]
_ID_COUNTER = itertools.count()
os.register_at_fork(after_in_child=lambda: _ID_PREFIX.__setitem__(0, uuid.uuid4().int >> 64))


def new_event_id() -> str:
    """A fresh event id: the idempotency key every consumer deduplicates on.

    A random 64-bit prefix per process (renewed in a forked child) and a counter, laid
    out as a version-4 UUID: unique like ``uuid4()`` without a system call per event.
    """
    value = (_ID_PREFIX[0] << 64) | (next(_ID_COUNTER) & 0xFFFF_FFFF_FFFF_FFFF)
    value = (value & ~(0xF000 << 64) | (0x4000 << 64)) & ~(0xC000 << 48) | (0x8000 << 48)
    return str(uuid.UUID(int=value))


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class EventHeaders:
    """The metadata of one event.

    Attributes:
        id: unique per event; consumers use it as the idempotency key.
        type: the Avro full name of the payload's schema (``procurement.v1.BudgetReserved``).
        source: the producing service, as a URI reference (``sagalog/budget-agent``).
        workflow_id: the saga instance; also the Kafka key, so one workflow's history
            is totally ordered in one partition.
        time: when the fact happened (UTC).
        causation_id: the id of the event this one reacts to, if any.
        correlation_id: shared by every event of one business transaction; defaults
            to the workflow id.
        flow_version: the version of the flow definition the workflow started under.
        priority: the workflow's priority lane (LOW, NORMAL, HIGH, URGENT); agents admit
            higher lanes first when saturated.
        traceparent: W3C trace context of the producer's span.
        tracestate: W3C vendor trace state.
        prev_hash: the content hash of the event this one reacts to (tamper evidence,
            see ``sagalog.contracts.hash_chain``).
        chain: the workflow's hash-chain head as the publisher knew it.
    """

    id: str
    type: str
    source: str
    workflow_id: str
    time: dt.datetime = field(default_factory=_utc_now)
    causation_id: str | None = None
    correlation_id: str | None = None
    flow_version: int | None = None
    priority: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    prev_hash: str | None = None
    chain: str | None = None

    def caused(
        self,
        event_type: str,
        *,
        source: str,
        traceparent: str | None,
        prev_hash: str | None = None,
    ) -> EventHeaders:
        """The headers of a new event this one causes: same workflow, correlation, flow
        version and priority lane; this event as its cause (``prev_hash``: its content
        hash, which links the new event to it)."""
        return EventHeaders(
            id=new_event_id(),
            type=event_type,
            source=source,
            workflow_id=self.workflow_id,
            causation_id=self.id,
            correlation_id=self.correlation_id or self.workflow_id,
            flow_version=self.flow_version,
            priority=self.priority,
            traceparent=traceparent,
            prev_hash=prev_hash,
        )

    def to_kafka(self) -> list[tuple[str, str | bytes | None]]:
        """Render as a Kafka header list, omitting absent optional attributes."""
        pairs: list[tuple[str, str | None]] = [
            (H_SPECVERSION, SPEC_VERSION),
            (H_ID, self.id),
            (H_SOURCE, self.source),
            (H_TYPE, self.type),
            (H_TIME, self.time.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")),
            (H_CONTENT_TYPE, CONTENT_TYPE),
            (H_WORKFLOW_ID, self.workflow_id),
            (H_CAUSATION_ID, self.causation_id),
            (H_CORRELATION_ID, self.correlation_id or self.workflow_id),
            (H_FLOW_VERSION, None if self.flow_version is None else str(self.flow_version)),
            (H_PRIORITY, self.priority),
            (H_TRACEPARENT, self.traceparent),
            (H_TRACESTATE, self.tracestate),
            (H_PREV_HASH, self.prev_hash),
            (H_CHAIN, self.chain),
        ]
        # confluent-kafka encodes str header values itself (UTF-8).
        return [(name, value) for name, value in pairs if value is not None]

    @classmethod
    def from_kafka(cls, headers: RawHeaders) -> EventHeaders:
        """Read the metadata back from a consumed record's headers.

        Raises:
            EventValidationError: naming every required header that is missing or
                malformed, so the record can be dead-lettered with that reason.
        """
        values = header_dict(headers)
        missing = [name for name in _REQUIRED if not values.get(name)]
        if missing:
            raise EventValidationError(
                f"record lacks required CloudEvents headers: {', '.join(missing)}; "
                "publish it through sagalog (or set them) so it can be routed"
            )
        try:
            time = dt.datetime.fromisoformat(values[H_TIME].replace("Z", "+00:00"))
        except ValueError:
            raise EventValidationError(
                f"header {H_TIME} is not an RFC 3339 timestamp: {values[H_TIME]!r}"
            ) from None
        flow_version: int | None = None
        if values.get(H_FLOW_VERSION):
            try:
                flow_version = int(values[H_FLOW_VERSION])
            except ValueError:
                raise EventValidationError(
                    f"header {H_FLOW_VERSION} is not an integer: {values[H_FLOW_VERSION]!r}"
                ) from None
        return cls(
            id=values[H_ID],
            type=values[H_TYPE],
            source=values[H_SOURCE],
            workflow_id=values[H_WORKFLOW_ID],
            time=time,
            causation_id=values.get(H_CAUSATION_ID),
            correlation_id=values.get(H_CORRELATION_ID),
            flow_version=flow_version,
            priority=values.get(H_PRIORITY),
            traceparent=values.get(H_TRACEPARENT),
            tracestate=values.get(H_TRACESTATE),
            prev_hash=values.get(H_PREV_HASH),
            chain=values.get(H_CHAIN),
        )


def header_dict(headers: RawHeaders) -> dict[str, str]:
    """Kafka headers as a dict of text values; the last value of a repeated name wins.

    Cheap enough to call on every record, so a consumer can route on ``ce_type``
    without building an ``EventHeaders``.
    """
    if not headers:
        return {}
    items = headers.items() if isinstance(headers, Mapping) else headers
    result: dict[str, str] = {}
    for name, value in items:
        if value is None:
            continue
        result[name] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return result


def header_value(headers: RawHeaders, name: str) -> str | None:
    """One header's text as ``header_dict`` would give it, without building the rest.

    An agent skips most records from their ``ce_type`` alone; looking up one name
    costs a fraction of decoding every header.
    """
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found: str | bytes | None = None
    for key, value in items:
        if key == name and value is not None:
            found = value
    if isinstance(found, bytes):
        return found.decode("utf-8", "replace")
    return found


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``)."""
    parts = (traceparent or "").split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None
