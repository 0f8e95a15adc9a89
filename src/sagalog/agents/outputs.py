"""What one record produces in the agent's transaction: its outputs, its retry record,
or its dead letter and the ``StepFailed`` that tells the tracker.

The triage decides which (``triage.Outcome``); this module builds the records, each
encoded for its topic and, for events, signed into the workflow's hash chain.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sagalog.agents.declaration import HandlerSpec
from sagalog.agents.records import headers_of
from sagalog.agents.routing import dead_letter_headers, retry_headers
from sagalog.agents.telemetry import AgentTelemetry
from sagalog.agents.triage import Outcome
from sagalog.blobs.fields import Schema, admits_blobs, offload
from sagalog.blobs.store import BlobStore
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import content_hash, signed
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.models import Event
from sagalog.errors import SagalogError
from sagalog.events import StepFailed
from sagalog.position import RecordPosition

OutRecord = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes | str | None]]]
"""(topic, key, value, headers): one record for the transaction to produce."""


@dataclass
class Result:
    """What became of one record; ``records`` are produced in the transaction."""

    outcome: Outcome
    records: list[OutRecord] = field(default_factory=list)
    error: str = ""
    duration_ms: float = 0.0
    step: str | None = None
    attempt: int | None = None


class RecordBuilder:
    """Builds an agent's output, retry and dead-letter records."""

    def __init__(
        self,
        *,
        agent: str,
        output_topic: str | None,
        retry_topic: str,
        deadletter_topic: str,
        codec: EventCodec,
        telemetry: AgentTelemetry,
        wall_ms: Callable[[], int],
        blobs: BlobStore | None = None,
        blob_threshold: int = 0,
    ) -> None:
        self.agent = agent
        self.blobs = blobs
        self.blob_threshold = blob_threshold
        self._blob_schemas: dict[str, Schema | None] = {}
        self.source = f"sagalog/{agent}"
        self.output_topic = output_topic
        self.retry_topic = retry_topic
        self.deadletter_topic = deadletter_topic
        self.codec = codec
        self.telemetry = telemetry
        self.wall_ms = wall_ms

    def output(
        self,
        cause: EventHeaders,
        origin_topic: str,
        event: Event,
        traceparent: str | None,
        cause_hash: str | None,
    ) -> OutRecord:
        """An output event caused by ``cause``, encoded for its topic and signed: its
        ``sagalog_prev_hash`` is ``cause_hash``, the hash of the record consumed."""
        headers = cause.caused(
            event.event_type, source=self.source, traceparent=traceparent, prev_hash=cause_hash
        )
        topic = self.output_topic or origin_topic
        value = self.codec.encode(topic, event.event_type, self._offloaded(event))
        key = cause.workflow_id.encode()
        return (topic, key, value, signed(key, value, headers.to_kafka()))

    def _offloaded(self, event: Event) -> dict[str, Any]:
        """The event's datum, its payloads over the threshold put in the blob store
        (``sagalog.blobs``) where its schema admits a reference and a store is set."""
        datum = event.to_avro()
        if self.blobs is None:
            return datum
        event_type = event.event_type
        if event_type not in self._blob_schemas:
            definition = self.codec.catalog[event_type].definition
            self._blob_schemas[event_type] = definition if admits_blobs(definition) else None
        blob_schema = self._blob_schemas[event_type]
        if blob_schema is None:
            return datum
        offloaded: dict[str, Any] = offload(
            blob_schema, datum, self.blobs, threshold=self.blob_threshold
        )
        return offloaded

    def retry(
        self,
        message: Any,
        outcome: Outcome,
        *,
        attempt: int,
        not_before_ms: int,
        origin: RecordPosition,
        error: str,
        extra: list[OutRecord] | None = None,
    ) -> Result:
        """The record again, to the retry topic, marked with its attempts and due time;
        ``extra`` (the attempt's recorded effects) goes before it."""
        headers = retry_headers(
            headers_of(message),
            attempt=attempt,
            not_before_ms=not_before_ms,
            origin=origin,
            error=error,
        )
        record: OutRecord = (self.retry_topic, message.key(), message.value(), headers)
        return Result(outcome, records=[*(extra or []), record], error=error)

    def dead(
        self,
        message: Any,
        *,
        reason: str,
        error: BaseException,
        attempts: int,
        origin: RecordPosition,
        spec: HandlerSpec | None = None,
        headers: EventHeaders | None = None,
        retryable: bool = False,
        redact: Callable[[str], str] | None = None,
    ) -> Result:
        """The record byte for byte to the dead-letter topic, saying why; and where a
        step ran (``spec`` and ``headers`` known), a ``StepFailed`` for the tracker.
        ``redact`` clears the stack of what the handler revealed (``reason`` comes
        cleared): the stack quotes every chained exception's message."""
        stack = "".join(traceback.format_exception(error))
        dlq_headers = dead_letter_headers(
            headers_of(message),
            agent=self.agent,
            reason=reason,
            error_class=f"{type(error).__module__}.{type(error).__qualname__}",
            stack=stack if redact is None else redact(stack),
            attempts=attempts,
            origin=origin,
            now_ms=self.wall_ms(),
        )
        records: list[OutRecord] = [
            (self.deadletter_topic, message.key(), message.value(), dlq_headers)
        ]
        if spec is not None and headers is not None:
            records.extend(
                self._step_failed(
                    message, spec, headers, origin, reason, error, attempts, retryable
                )
            )
        return Result(Outcome.DEAD_LETTER, records=records, error=reason)

    def gated(
        self,
        message: Any,
        *,
        reason: str,
        error: BaseException,
        attempts: int,
        origin: RecordPosition,
        spec: HandlerSpec,
        headers: EventHeaders,
    ) -> Result:
        """The step ran out of budget and its flow opens a gate: a ``StepFailed`` for the
        tracker, and no dead letter. The event is not bad; the gate's approval runs
        the step again on it, from the projection."""
        failed = self._step_failed(message, spec, headers, origin, reason, error, attempts, False)
        return Result(Outcome.GATED, records=failed, error=reason)

    def _step_failed(
        self,
        message: Any,
        spec: HandlerSpec,
        headers: EventHeaders,
        origin: RecordPosition,
        reason: str,
        error: BaseException,
        attempts: int,
        retryable: bool,
    ) -> list[OutRecord]:
        failed = StepFailed(
            step=spec.step,
            reason=reason[:2000],
            error_class=type(error).__qualname__,
            attempts=attempts,
            retryable=retryable,
        )
        try:
            cause_hash = content_hash(message.key(), message.value(), headers_of(message))
            return [self.output(headers, origin.topic, failed, headers.traceparent, cause_hash)]
        except SagalogError as exc:
            self.telemetry.log(
                "dead_letter",
                f"could not publish StepFailed: {exc}",
                level=logging.ERROR,
                workflow_id=headers.workflow_id,
            )
            return []
