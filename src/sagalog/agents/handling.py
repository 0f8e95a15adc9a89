"""Running the handlers of one batch: workflows concurrently, each workflow in order.

Different workflows run concurrently up to ``max_in_flight``, highest priority lane
first (``sagalog.priority.schedule``); a workflow's own events run one after another
in log order, and once one of them goes to the retry topic the rest park behind it
(``Outcome.holds_workflow``). Each run gets a timeout, a span and a context as of
its own event; what it returns, raises or records becomes a ``Result``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sagalog.agents.context import HandlerContext, Perform
from sagalog.agents.declaration import HandlerSpec
from sagalog.agents.failures import (
    BudgetRefused,
    DependencyUnavailable,
    StepTimeout,
    is_retryable,
)
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.model_stream import WriteStream
from sagalog.agents.outputs import OutRecord, RecordBuilder, Result
from sagalog.agents.records import headers_of
from sagalog.agents.settings import AgentSettings
from sagalog.agents.state_store import StateStore
from sagalog.agents.telemetry import AgentTelemetry, current_traceparent
from sagalog.agents.triage import PARKED_BEHIND, Outcome, after_failure
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.backoff import RetryPolicy
from sagalog.budgets.book import BudgetBook
from sagalog.budgets.claims import ClaimNote
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.models import Event
from sagalog.position import RecordPosition
from sagalog.priority import schedule


@dataclass
class Work:
    """One record the triage admitted: a handler runs on it in this batch."""

    message: Any
    delivered: RecordPosition
    headers: EventHeaders
    spec: HandlerSpec
    event: Event
    attempt: int
    origin: RecordPosition  # where the event was first consumed
    from_retry: bool
    priority: int
    context: WorkflowContext
    cause_hash: str | None = None  # the input's content hash: its outputs' prev_hash
    rerun_of: str | None = None  # a StepRetryRequested: the id of the event run again
    over_budget: bool = False  # a StepRetryRequested after an approved budget gate


class HandlerRunner:
    """Runs admitted work and turns each run into a ``Result``."""

    def __init__(
        self,
        *,
        agent: str,
        settings: AgentSettings,
        store: StateStore,
        flow: FlowControl,
        telemetry: AgentTelemetry,
        builder: RecordBuilder,
        policy: RetryPolicy,
        clock: Callable[[], float],
        wall_ms: Callable[[], int],
        give_up: Callable[[], bool],
        budgets: BudgetBook | None = None,
        budget_policies: Mapping[str, str] | None = None,
        perform: Perform | None = None,
        write_claim: Callable[[ClaimNote], Awaitable[None]] | None = None,
        write_stream: WriteStream | None = None,
    ) -> None:
        """Args:
        wall_ms: the wall clock, which a handler reads as ``ctx.clock`` too.
        give_up: whether the shutdown budget is spent; the batch is then abandoned
            uncommitted (and redelivered).
        budgets: the agent's budgets on this instance, for ``ctx.model_call``.
        budget_policies: step -> ``on_budget_exhausted`` (a step not named waits).
        perform: stands in for effects' calls (``HandlerContext.perform``); None in
            production.
        write_claim: writes a model call's claim to the claims topic before the call
            (``HandlerContext.write_claim``).
        write_stream: publishes a model stream's records (``HandlerContext.write_stream``).
        """
        self.perform = perform
        self.write_claim = write_claim
        self.write_stream = write_stream
        self.budgets = budgets
        self.budget_policies = dict(budget_policies or {})
        self.agent = agent
        self.settings = settings
        self.store = store
        self.flow = flow
        self.telemetry = telemetry
        self.builder = builder
        self.policy = policy
        self.clock = clock
        self.wall_ms = wall_ms
        self.give_up = give_up

    async def run(self, items: list[Work]) -> list[tuple[Work, Result]] | None:
        """Run the batch's handlers.

        Returns:
            Each item's result, or None when the shutdown budget ran out first.
        """
        limit = asyncio.Semaphore(self.settings.max_in_flight)
        results: list[tuple[Work, Result]] = []
        groups = schedule(items, key=lambda i: i.headers.workflow_id, priority=lambda i: i.priority)

        async def run_group(group: list[Work]) -> None:
            blocked = False
            for item in group:
                if blocked:
                    parked = self.builder.retry(
                        item.message,
                        Outcome.PARK,
                        attempt=item.attempt - 1,
                        not_before_ms=0,
                        origin=item.origin,
                        error=PARKED_BEHIND,
                    )
                    results.append((item, parked))
                    continue
                async with limit:
                    result = await self.handle(item)
                results.append((item, result))
                blocked = result.outcome.holds_workflow

        tasks = [asyncio.ensure_future(run_group(g)) for g in groups]
        if not tasks:
            return results
        pending: set[asyncio.Future[None]] = set(tasks)
        while pending:
            # Wake up now and then: a SIGTERM gives the batch shutdown_timeout_s to
            # finish; past it, the batch is abandoned uncommitted and redelivered.
            _, pending = await asyncio.wait(pending, timeout=0.1)
            if pending and self.give_up():
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending)
                return None
        for task in tasks:
            task.result()
        return results

    async def handle(self, item: Work) -> Result:
        """One handler run: success, a deferral, a retry or a dead letter."""
        spec, headers = item.spec, item.headers
        ctx = HandlerContext(
            agent=self.agent,
            step=spec.step,
            headers=headers,
            attempt=item.attempt,
            workflow=item.context,
            raw_headers=headers_of(item.message),
            delivery=item.delivered,
            store=self.store,
            flow=self.flow,
            blobs=self.builder.blobs,
            personal_data=self.builder.codec.personal,
            budgets=self.budgets,
            on_budget_exhausted=self.budget_policies.get(spec.step, "wait"),
            origin=item.origin,
            monotonic=self.clock,
            clock=self._wall_time,
            perform=self.perform,
            write_claim=self.write_claim,
            write_stream=self.write_stream,
            over_budget=item.over_budget,
            rerun_of=item.rerun_of,
        )
        timeout = spec.timeout_s or self.settings.step_timeout_s
        started = self.clock()
        attributes = {
            "messaging.system": "kafka",
            "messaging.destination.name": item.origin.topic,
            "sagalog.workflow_id": headers.workflow_id,
            "sagalog.step": spec.step,
            "sagalog.event_type": headers.type,
            "sagalog.attempt": item.attempt,
        }
        span = (
            self.telemetry.span(
                f"handle {headers.type}", traceparent=headers.traceparent, attributes=attributes
            )
            if self.settings.tracing
            else contextlib.nullcontext()
        )
        with span:
            try:
                try:
                    async with asyncio.timeout(timeout):  # no extra task, unlike wait_for
                        returned = await spec.call(item.event, ctx)
                except TimeoutError as exc:
                    raise StepTimeout(
                        f"step '{spec.step}' ran past its {timeout:g}s timeout and was cancelled"
                    ) from exc
                outputs = spec.outputs(item.event, _as_list(returned))
                records = self._recorded(item, [*ctx.recorded, *outputs])
                result = Result(Outcome.HANDLED, records=records)
            except DependencyUnavailable as exc:
                result = self._deferral(item, exc, ctx)
            except Exception as exc:
                if ctx.failed_probe is not None and is_retryable(exc):
                    # Its call probed the dependency and found it still down: an
                    # outage's probe is not the event's failure (see circuit_breaker).
                    result = self._deferral(item, ctx.failed_probe, ctx, cause=exc)
                else:
                    result = self._failure(item, exc, ctx)
        result.duration_ms = (self.clock() - started) * 1000
        result.step, result.attempt = spec.step, item.attempt
        return result

    def _wall_time(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.wall_ms() / 1000, dt.UTC)

    def _deferral(
        self,
        item: Work,
        unavailable: DependencyUnavailable,
        ctx: HandlerContext,
        *,
        cause: Exception | None = None,
    ) -> Result:
        """Try again once the dependency can take the call, spending no attempt."""
        delay_ms = max(0, int((unavailable.retry_at - self.clock()) * 1000))
        error = str(unavailable)
        if cause is not None:
            error += f" (its probe failed: {cause.__class__.__name__}: {ctx.redact(str(cause))})"
        return self.builder.retry(
            item.message,
            Outcome.DEFER,
            attempt=item.attempt - 1,  # a deferral spends no attempt
            not_before_ms=self.wall_ms() + delay_ms,
            origin=item.origin,
            error=error,
            extra=self._recorded(item, ctx.recorded),  # its effects still count
        )

    def _recorded(self, item: Work, events: Sequence[Event]) -> list[OutRecord]:
        traceparent = current_traceparent() or item.headers.traceparent
        return [
            self.builder.output(item.headers, item.origin.topic, e, traceparent, item.cause_hash)
            for e in events
        ]

    def _failure(self, item: Work, error: Exception, ctx: HandlerContext) -> Result:
        """A failed attempt: retry with backoff, or dead-letter and fail the step."""
        retryable = is_retryable(error)
        recorded = self._recorded(item, ctx.recorded)
        outcome = after_failure(retryable=retryable, attempt=item.attempt, policy=self.policy)
        if outcome is Outcome.RETRY:
            delay = self.policy.delay(item.attempt)
            return self.builder.retry(
                item.message,
                Outcome.RETRY,
                attempt=item.attempt,
                origin=item.origin,
                not_before_ms=self.wall_ms() + int(delay * 1000),
                error=f"{error.__class__.__name__}: {ctx.redact(str(error))}",
                extra=recorded,
            )
        # The reason goes to the log (the StepFailed, the tracker's transitions, the
        # dead letter): an answer quoted in the error may hold what the handler revealed.
        reason = (
            f"step '{item.spec.step}' failed after {item.attempt} attempt(s): "
            f"{error.__class__.__name__}: {ctx.redact(str(error))}"
        )
        # Out of budget with a gate to decide: a StepFailed alone, no dead letter.
        gated = isinstance(error, BudgetRefused) and error.gated
        finish = (
            self.builder.gated
            if gated
            else partial(self.builder.dead, retryable=retryable, redact=ctx.redact)
        )
        result = finish(
            item.message,
            reason=reason,
            error=error,
            attempts=item.attempt,
            origin=item.origin,
            spec=item.spec,
            headers=item.headers,
        )
        result.records[:0] = recorded
        return result


def _as_list(returned: Any) -> list[Event]:
    if returned is None:
        return []
    if isinstance(returned, Event):
        return [returned]
    return list(returned)
