"""Reading one consumed record into the triage's facts, gate by gate.

Each gate of ``triage`` is asked as soon as its facts are known, and the facts of
the next gate are gathered only if the record gets that far: most records stop at
the ``ce_type`` header, and only the records a handler takes are decoded. Folding
into the projection happens here too, for every kept input event, whatever the
verdict: the projection is a function of the log, not of what this agent handles.
"""

from __future__ import annotations

from typing import Any

from sagalog.agents.binding import BoundAgent
from sagalog.agents.declaration import HandlerSpec
from sagalog.agents.handling import Work
from sagalog.agents.outputs import RecordBuilder, Result
from sagalog.agents.records import Delivered
from sagalog.agents.routing import read_mark
from sagalog.agents.state_store import StateStore
from sagalog.agents.triage import Outcome, Verdict, admit, origin_of, screen, sort
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import content_hash
from sagalog.contracts.headers import EventHeaders
from sagalog.errors import EventValidationError, SchemaError
from sagalog.flows.model import BUDGET_GATE_SUFFIX, STEP_RETRY_REQUESTED
from sagalog.priority import Priority


class Intake:
    """Turns consumed records into work for the handlers, or into their final result."""

    def __init__(
        self,
        *,
        agent: BoundAgent,
        store: StateStore,
        codec: EventCodec,
        builder: RecordBuilder,
        retry_topic: str,
    ) -> None:
        self.agent = agent
        self.store = store
        self.codec = codec
        self.builder = builder
        self.retry_topic = retry_topic

    def take(self, record: Delivered) -> Work | Result:
        """Fold a record into the projection and decide, through the triage's gates,
        whether a handler runs: the work to run, or what became of the record."""
        store = self.store
        message, raw_headers, delivered = record.message, record.headers, record.position
        from_retry = delivered.topic == self.retry_topic
        event_type = record.event_type
        skipped = screen(
            from_retry=from_retry,
            event_type=event_type,
            kept=from_retry or not event_type or store.keeps(event_type),
        )
        if skipped is not None:
            return Result(skipped.outcome)
        mark = read_mark(raw_headers) if from_retry else None
        origin = origin_of(delivered, from_retry=from_retry, mark=mark)
        try:
            headers = EventHeaders.from_kafka(raw_headers)
        except EventValidationError as exc:
            verdict = sort(
                delivered=delivered,
                origin=origin,
                header_error=str(exc),
                first_seen=None,
                wanted=False,
            )
            assert verdict is not None
            return self._dead(message, verdict, exc)
        first_seen = None
        if from_retry:
            context = store.context(headers.workflow_id)
        else:
            context, first_seen = store.fold(
                workflow_id=headers.workflow_id,
                event_id=headers.id,
                event_type=headers.type,
                source=headers.source,
                payload=message.value(),
                position=delivered,
            )
        verdict = sort(
            delivered=delivered,
            origin=origin,
            header_error=None,
            first_seen=first_seen,
            wanted=self.agent.wants(headers.type),
        )
        if verdict is not None:
            if verdict.outcome is Outcome.DEAD_LETTER:
                return self._dead(message, verdict, EventValidationError(verdict.reason))
            return Result(verdict.outcome)
        assert origin is not None  # sort dead-letters a record without one
        context = context.snapshot()  # as of this event, not of the batch's end
        spec = event = rerun_of = None
        decode_error = validation_error = None
        error: Exception | None = None
        try:
            decoded = self.codec.decode(message.value())
        except SchemaError as exc:
            decode_error, error = str(exc), exc
        else:
            context.decoder = self._payload_of
            spec = self.agent.handler_for(headers.type, decoded.payload)
            payload = decoded.payload
            if spec is not None and headers.type == STEP_RETRY_REQUESTED:
                try:
                    rerun_of, payload, context = start_of_rerun(spec.step, spec.event_type, context)
                except EventValidationError as exc:
                    validation_error, error = str(exc), exc
            if spec is not None and validation_error is None:
                try:
                    event = spec.event_class.from_avro(payload)
                except Exception as exc:  # a payload that decodes but breaks the class's rules
                    validation_error = (
                        f"payload fails {spec.event_class.__name__} validation: {exc}"
                    )
                    error = exc
        verdict = admit(
            origin=origin,
            event_id=headers.id,
            from_retry=from_retry,
            mark=mark,
            decode_error=decode_error,
            has_handler=spec is not None,
            validation_error=validation_error,
            parked={} if from_retry else store.parked(headers.workflow_id),
        )
        match verdict.outcome:
            case Outcome.DEAD_LETTER:
                assert error is not None
                named = spec if validation_error is not None else None
                return self._dead(message, verdict, error, spec=named, headers=headers)
            case Outcome.PARK:
                # Parked in its own right, before the commit like every parking: it
                # waits in the retry topic behind the earlier event, and an event that
                # arrives after the earlier one ends must still wait behind this one.
                store.park(headers.workflow_id, headers.id, origin.offset)
                return self.builder.retry(
                    message,
                    Outcome.PARK,
                    attempt=verdict.attempt,
                    not_before_ms=0,
                    origin=origin,
                    error=verdict.reason,
                )
            case Outcome.HANDLE:
                assert spec is not None and event is not None
                return Work(
                    message=message,
                    delivered=delivered,
                    headers=headers,
                    spec=spec,
                    event=event,
                    attempt=verdict.attempt,
                    origin=origin,
                    from_retry=from_retry,
                    priority=int(Priority.parse(headers.priority)),
                    context=context,
                    cause_hash=content_hash(message.key(), message.value(), raw_headers),
                    rerun_of=rerun_of,
                    over_budget=rerun_of is not None and bool(decoded.payload.get("over_budget")),
                )
            case _:
                return Result(verdict.outcome)

    def _dead(
        self,
        message: Any,
        verdict: Verdict,
        error: Exception,
        *,
        spec: HandlerSpec | None = None,
        headers: EventHeaders | None = None,
    ) -> Result:
        """A record the triage dead-lettered before any handler ran (attempts 0); a
        ``StepFailed`` too where its handler is known (``spec``)."""
        assert verdict.origin is not None
        return self.builder.dead(
            message,
            reason=verdict.reason,
            error=error,
            attempts=0,
            origin=verdict.origin,
            spec=spec,
            headers=headers,
        )

    def _payload_of(self, raw: bytes) -> dict[str, Any]:
        return self.codec.decode(raw).payload


def start_of_rerun(
    step: str, event_type: str, context: WorkflowContext
) -> tuple[str, dict[str, Any], WorkflowContext]:
    """What a ``StepRetryRequested`` runs ``step`` on again: the latest ``event_type``
    (the step's start) in the workflow's projection, its id and payload, and the
    context the handler sees, all with the step's budget gate's own openings and
    decisions left out (``WorkflowContext.without_gate``): a step started by a gate's
    decision starts on that decision again, not on its budget gate's, and finds the
    workflow as it first ran.

    Raises:
        EventValidationError: the projection holds no such event (or no longer its
            payload: folded before the projection kept gate decisions by id): the
            request is dead-lettered with the reason.
    """
    view = context.without_gate(f"{step}{BUDGET_GATE_SUFFIX}")
    start_id = next((eid for eid, kind, _ in reversed(view.history) if kind == event_type), None)
    payload = view.get(event_type) if start_id is not None else None
    if start_id is None or payload is None:
        raise EventValidationError(
            f"step '{step}' is to run again, but the event that starts it ({event_type}) is "
            f"not in this agent's projection of workflow {context.workflow_id}"
        )
    return start_id, payload, view
