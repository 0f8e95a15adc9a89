"""What the gateway does for a request, apart from HTTP: check, publish, remember.

``Gateway`` holds the read model, the publisher and the flows; the API and the
reviews page are thin shells around its methods, so both answer the same request
the same way, and tests drive it without a server.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from opentelemetry import trace

from sagalog.contracts.models import Event
from sagalog.errors import FlowDefinitionError, SagalogError
from sagalog.events import GateDecided, WebhookReceived, WorkflowCancelled
from sagalog.flows.model import Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.health import Verdict
from sagalog.publisher import PublishedEvent
from sagalog.services.gateway.decisions import (
    Decision,
    cancellation_event_id,
    check_decision,
    decision_event_id,
)
from sagalog.services.gateway.exceptions import (
    AlreadyDecided,
    AlreadyEnded,
    AmbiguousKey,
    FlowNotLoaded,
    NotReady,
    PublishFailed,
    UnknownWorkflow,
)
from sagalog.services.gateway.follower import FollowerStatus
from sagalog.services.gateway.read_model import ReadModel
from sagalog.services.gateway.views import Accepted, DecisionAccepted
from sagalog.services.gateway.webhooks import WebhookCall, webhook_event_id
from sagalog.tracing import child_traceparent
from sagalog.tracker.record import WorkflowRecord
from sagalog.tracker.seal import chain_head

PUBLISH_PROBLEM_S = 30.0
"""A failed publish keeps the gateway ``degraded`` this long, unless one succeeds first."""


class Publisher(Protocol):
    def publish_event(self, topic: str, event: Event, **metadata: Any) -> PublishedEvent: ...

    def publish_record(
        self,
        topic: str,
        *,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, str | bytes | None]],
    ) -> tuple[int, int]: ...


class Gateway:
    """The gateway's use cases; thread-safe (the API runs them in a thread pool)."""

    def __init__(
        self,
        *,
        model: ReadModel,
        publisher: Publisher,
        flows: FlowRegistry,
        secret: bytes,
        status: Callable[[], FollowerStatus],
        follower_alive: Callable[[], bool] = lambda: True,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.model = model
        self.follower_alive = follower_alive
        self.publisher = publisher
        self.flows = flows
        self.secret = secret
        self.status = status
        self.now = now
        self.tracer = trace.get_tracer("sagalog.gateway")
        self.lock = threading.Lock()
        """Held from a request's checks to its publish, so two requests that would
        publish the same event are one publish and one repeat (or refusal)."""
        self._publish_problem: tuple[float, str] | None = None  # (monotonic time, error)

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` reports: the follower's status, and ``status`` ``starting``
        (not caught up yet: 503), ``ok``, or ``degraded`` (the broker does not answer
        the follower, or a publish failed lately) while reads are still served."""
        status = self.status()
        body = dict(vars(status))
        problems = dict(status.problems)
        problem = self._publish_problem
        if problem is not None and time.monotonic() - problem[0] < PUBLISH_PROBLEM_S:
            problems["publish"] = {
                "for_s": round(time.monotonic() - problem[0], 1),
                "error": problem[1],
            }
        health = status.health
        if health == "ok" and problems:
            health = "degraded"
        body.pop("health", None)
        return {**body, "status": health, "problems": problems}

    def liveness(self) -> Verdict:
        """``/health/live``: the process serves (it answers at all) and its read-model
        follower thread runs. A follower that died never catches up again, so the
        gateway would answer 503 forever: that is the one thing a restart cures. A
        broker outage is not (the follower rides it out and says ``degraded``)."""
        running = self.follower_alive()
        return Verdict(
            running,
            {
                "status": "live" if running else "stuck",
                "follower": "running" if running else "stopped",
            },
        )

    def require_ready(self) -> None:
        """Refuse to answer from a read model that has not caught up yet.

        Raises:
            NotReady: with the lag and what the follower waits for (503).
        """
        status = self.status()
        if not status.ready:
            waiting = f" (waiting for {status.waiting_for})" if status.waiting_for else ""
            raise NotReady(
                "the gateway is still reading the tracker's state"
                f"{waiting}; retry in a few seconds (GET /healthz shows the progress)",
                lag=status.lag,
                last_error=status.last_error,
            )

    def flow_of(self, record: WorkflowRecord) -> Flow:
        try:
            return self.flows.get(record.flow, record.flow_version)
        except FlowDefinitionError as exc:
            raise FlowNotLoaded(
                f"workflow '{record.workflow_id}' runs {record.flow} v{record.flow_version}, "
                f"which this gateway has not loaded ({exc}); deploy the gateway with the "
                "same topology/flows/ as the tracker",
                workflow_id=record.workflow_id,
            ) from None

    def decide(
        self,
        *,
        workflow_id: str,
        token: str,
        decision: Decision,
        decided_by: str,
        comment: str | None,
    ) -> DecisionAccepted:
        """Publish a person's decision, once.

        Raises:
            GatewayError: the refusals of ``check_decision``, ``AlreadyDecided`` when
                the token was answered the other way, ``PublishFailed``.
        """
        self.require_ready()
        event_id = decision_event_id(token, decision)
        with self.lock:
            repeat = self.model.accepted(event_id)
            if repeat is not None and repeat["workflow_id"] == workflow_id:
                return DecisionAccepted.model_validate({**repeat, "duplicate": True})
            earlier = self.model.token_decision(token)
            if earlier is not None and earlier["workflow_id"] == workflow_id:
                raise AlreadyDecided(
                    f"gate '{earlier['gate']}' of workflow '{workflow_id}' was already "
                    f"decided through the gateway: {earlier['decision']} (event "
                    f"{earlier['event_id']}); a decision cannot be changed",
                    workflow_id=workflow_id,
                    decision=earlier["decision"],
                    event_id=earlier["event_id"],
                )
            record = self.model.record(workflow_id)
            flow = self.flow_of(record) if record is not None else None
            gate = check_decision(
                record, workflow_id=workflow_id, token=token, secret=self.secret, flow=flow
            )
            assert record is not None and flow is not None
            event = GateDecided(
                gate=gate.gate,
                token=token,
                decision=decision.gate_decision,
                decided_by=decided_by,
                comment=comment,
            )
            published = self.publish(flow.topic, event, record, event_id=event_id)
            accepted = DecisionAccepted(
                **_placed(published, workflow_id),
                gate=gate.gate,
                decision=decision,
                decided_by=decided_by,
            )
            self.model.remember(event_id, accepted.model_dump(mode="json"), token=token)
            return accepted

    def cancel(self, workflow_id: str, *, reason: str, requested_by: str) -> Accepted:
        """Publish an operator's ``WorkflowCancelled``, once per workflow.

        Raises:
            UnknownWorkflow: 404. AlreadyEnded: it ended or is compensating (409).
            PublishFailed: Kafka did not take it (503).
        """
        self.require_ready()
        event_id = cancellation_event_id(workflow_id)
        with self.lock:
            repeat = self.model.accepted(event_id)
            if repeat is not None:
                return Accepted.model_validate({**repeat, "duplicate": True})
            record = self.model.record(workflow_id)
            if record is None:
                raise UnknownWorkflow(
                    f"no workflow '{workflow_id}' is known to the gateway; check the id "
                    "(sagalog workflows list)",
                    workflow_id=workflow_id,
                )
            if record.is_terminal or record.state is WorkflowState.COMPENSATING:
                raise AlreadyEnded(
                    f"workflow '{workflow_id}' is {record.state}"
                    + (f" ({record.terminal_reason})" if record.terminal_reason else "")
                    + ": there is nothing left to cancel",
                    workflow_id=workflow_id,
                    state=record.state.value,
                )
            event = WorkflowCancelled(reason=reason, requested_by=requested_by)
            published = self.publish(self.flow_of(record).topic, event, record, event_id=event_id)
            accepted = Accepted(**_placed(published, workflow_id))
            self.model.remember(event_id, accepted.model_dump(mode="json"), token=None)
            return accepted

    def webhook(self, call: WebhookCall, *, idempotency_key: str | None) -> Accepted:
        """Publish a webhook call as ``WebhookReceived`` on its workflow's topic.

        Raises:
            UnknownWorkflow: the workflow named is not known (404).
            PublishFailed: Kafka did not take it (503).
        """
        self.require_ready()
        event_id = webhook_event_id(call, idempotency_key)
        with self.lock:
            repeat = self.model.accepted(event_id) if event_id else None
            if repeat is not None:
                return Accepted.model_validate({**repeat, "duplicate": True})
            record = self._target(call)
            flow = self.flow_of(record)
            event = WebhookReceived(
                kind=call.kind,
                source=call.source,
                payload_json=call.payload_json,
                received_at=self.now(),
            )
            published = self.publish(flow.topic, event, record, event_id=event_id)
            accepted = Accepted(**_placed(published, record.workflow_id))
            if event_id is not None:
                self.model.remember(event_id, accepted.model_dump(mode="json"), token=None)
            return accepted

    def _target(self, call: WebhookCall) -> WorkflowRecord:
        """The workflow a webhook names, by id or by a correlation key.

        A key may name finished workflows too (a reused order number): the one still
        running is meant. Raises ``UnknownWorkflow`` (404) or ``AmbiguousKey`` (409).
        """
        if call.workflow_id is not None:
            record = self.model.record(call.workflow_id)
            if record is None:
                raise UnknownWorkflow(
                    f"no workflow '{call.workflow_id}' is known to the gateway; the webhook "
                    "was not published. Check the workflow_id in the callback URL",
                    workflow_id=call.workflow_id,
                )
            return record
        assert call.correlation is not None
        name, value = call.correlation
        found = self.model.by_key(name, value)
        running = [r for r in found if not r.is_terminal] or found
        if not running:
            raise UnknownWorkflow(
                f"no workflow with {name}={value!r} is known to the gateway; the webhook was "
                f"not published. Check the {name} in the callback URL",
                key=name,
                value=value,
            )
        if len(running) > 1:
            ids = [r.workflow_id for r in running]
            raise AmbiguousKey(
                f"{name}={value!r} names {len(ids)} running workflows ({', '.join(ids)}); the "
                "webhook was not published. Name the one meant with ?workflow_id=",
                key=name,
                value=value,
                workflow_ids=ids,
            )
        return running[0]

    def publish(
        self,
        topic: str,
        event: Event,
        record: WorkflowRecord | None,
        *,
        event_id: str | None,
        workflow_id: str = "",
    ) -> PublishedEvent:
        """Publish on the workflow's behalf; ``sagalog_chain`` is the chain head of the
        record the request was checked against, so the log shows what the gateway saw.
        ``record`` None: a workflow the tracker never started, named by ``workflow_id``.
        The event continues the workflow's trace (the record's last trace context), with
        a span of the gateway's when spans are exported (``sagalog.tracing``)."""
        target = record.workflow_id if record is not None else workflow_id
        traceparent = child_traceparent(
            self.tracer,
            f"gateway {event.event_type}",
            record.traceparent if record is not None else None,
            attributes={"sagalog.workflow_id": target, "sagalog.event_type": event.event_type},
        )
        with self.publishing(topic, target, event_id):
            return self.publisher.publish_event(
                topic,
                event,
                workflow_id=target,
                flow_version=record.flow_version if record else None,
                event_id=event_id,
                priority=record.priority.name if record else None,
                chain=chain_head(record) if record else None,
                traceparent=traceparent,
            )

    @contextmanager
    def publishing(self, topic: str, workflow_id: str, event_id: str | None) -> Iterator[None]:
        """Around a publish: Kafka's refusal becomes ``PublishFailed`` (503, retry as
        is), and the gateway's health says ``degraded`` until a publish succeeds."""
        try:
            yield
        except SagalogError as exc:
            self._publish_problem = (time.monotonic(), str(exc))
            again = (
                "retry the same request after Retry-After: it carries the same event id "
                "each time, so it is taken once"
                if event_id is not None
                else "retry it after Retry-After with an Idempotency-Key header, so that a "
                "retry cannot publish it twice"
            )
            raise PublishFailed(
                f"the event was not acknowledged by Kafka ({exc}); {again}",
                topic=topic,
                workflow_id=workflow_id,
                event_id=event_id,
                retry_after_s=PublishFailed.retry_after_s,
            ) from exc
        self._publish_problem = None


def _placed(published: PublishedEvent, workflow_id: str) -> dict[str, Any]:
    return {
        "event_id": published.headers.id,
        "event_type": published.headers.type,
        "workflow_id": workflow_id,
        "topic": published.topic,
        "partition": published.partition,
        "offset": published.offset,
    }
