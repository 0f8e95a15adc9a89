"""What a handler receives besides its event: the workflow's context and the
side-effect shell.

``ctx.effect`` is the only door to the world outside Kafka. It derives an idempotency
key from the causing event (stable across redeliveries and retries), hands it to the
dependency, and records the confirmed result in the local ledger and, through an
``EffectRecorded`` event, in the log. A redelivered event finds its effects recorded
and gets the recorded results back without calling the dependency again; an instance
that lost its ledger calls again with the same key, which the dependency honours.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sagalog.agents.failures import (
    BudgetRefused,
    BudgetWait,
    DependencyUnavailable,
    NonRetryableError,
)
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.intents import (
    EffectIntent,
    Settlement,
    arguments_digest,
    describe,
    settlement_of_lookup,
)
from sagalog.agents.lineage import DecisionLineage, decision_lineage
from sagalog.agents.model_stream import (
    ModelStream,
    OnText,
    StreamPublisher,
    WriteStream,
    streaming,
)
from sagalog.agents.state_store import StateStore
from sagalog.agents.workflow_context import Reader, WorkflowContext
from sagalog.blobs.store import BlobModified, BlobRef, BlobStore
from sagalog.budgets.book import BudgetBook, Spend, logged_claim
from sagalog.budgets.claims import ClaimNote, next_reservation
from sagalog.budgets.estimate import Price, estimate
from sagalog.budgets.ledger import BudgetExceeded, Exhausted, Granted, Usage
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.json_values import jsonable
from sagalog.errors import ConfigurationError, PersonalDataError
from sagalog.events import EffectRecorded
from sagalog.flows.model import BUDGET_GATE_SUFFIX
from sagalog.personal import ERASED
from sagalog.personal.cipher import PersonalData
from sagalog.personal.envelope import parse as parse_envelope
from sagalog.personal.redaction import redact
from sagalog.position import RecordPosition
from sagalog.streams.record import attempt_of

Perform = Callable[
    ["HandlerContext", str, Callable[..., Any], Callable[..., Any] | None],
    tuple[Callable[..., Any], Callable[..., Any] | None],
]
"""``perform(ctx, effect_name, call, lookup)``: the functions to call in the place of
``call`` and of ``lookup`` (the effect's reconciliation, None when it has none)."""


def idempotency_key(*, agent: str, event_id: str, effect: str, occurrence: int) -> str:
    """The key of the ``occurrence``-th call of ``effect`` while handling ``event_id``."""
    material = f"{agent}\x1f{event_id}\x1f{effect}\x1f{occurrence}"
    return hashlib.sha256(material.encode()).hexdigest()[:32]


@dataclass
class HandlerContext:
    """One handler invocation's view of its workflow and its door to side effects.

    Attributes:
        agent: the agent's name.
        step: the step this handler performs.
        headers: the triggering event's metadata.
        attempt: 1 for the first attempt, 2 for the first retry, and so on.
        workflow: the workflow's accumulated context (earlier steps' outputs, gate
            decisions, webhook payloads), from the agent's local projection:
            ``ctx.workflow.latest(BudgetReserved)``, ``ctx.workflow.require(...)``.
        record_headers: every header of the triggering record as text, for headers
            beyond the CloudEvents ones (a partner's correlation header, say).
    """

    agent: str
    step: str
    headers: EventHeaders
    attempt: int
    workflow: WorkflowContext
    store: StateStore
    flow: FlowControl
    raw_headers: list[tuple[str, bytes | str | None]] = field(default_factory=list)
    delivery: RecordPosition | None = None  # the record being handled
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    recorded: list[EffectRecorded] = field(default_factory=list)
    effects_called: int = 0
    blobs: BlobStore | None = None
    """The blob store the agent's outputs are offloaded to (``SAGALOG_BLOB_DIR`` or
    ``SAGALOG_BLOB_URL``), from which ``content`` reads a field held as a blob."""
    personal_data: PersonalData | None = None
    """The agent's personal-data keys (``SAGALOG_PERSONAL_DATA_KEY_FILE``), with which
    ``reveal`` opens a personal field; outputs are sealed by the codec either way."""
    budgets: BudgetBook | None = None
    """The agent's budgets on this instance (``Agent(budgets=...)``), which
    ``model_call`` reserves in."""
    on_budget_exhausted: str = "wait"
    """What the step's flow says to do when a budget runs out: ``wait``, ``fail`` or
    ``gate``."""
    over_budget: bool = False
    """A person let this run go over its budgets (its budget gate was approved): its
    model calls are counted, never refused."""
    rerun_of: str | None = None
    """The event a step run again after its budget gate (``StepRetryRequested``)
    handles again: its effects keep that event's keys, so the calls made before the
    refusal come back from their record and the run goes on from the refused one."""
    origin: RecordPosition | None = None
    """Where the event was first consumed (its input partition, also for a retry):
    the partition a model call's budget claim belongs to."""
    write_claim: Callable[[ClaimNote], Awaitable[None]] | None = None
    """Writes a model call's claim, acknowledged, to the agent's claims topic before
    the call is made (``agents.claims``), so the partition's next holder counts it
    if this instance dies during the call; None: the claim stays in the store and the
    log only (no broker: ``sagalog.testing``)."""
    write_stream: WriteStream | None = None
    """Publishes a ``model_stream``'s deltas to its workflow's stream topic
    (``agents.streaming``); None: the handler still reads them, nobody else
    (no broker: ``sagalog.testing``)."""
    monotonic: Callable[[], float] = time.monotonic
    """The runtime's clock, in which a deferral's ``retry_at`` is given."""
    perform: Perform | None = None
    """What makes an effect's call and its lookup: None, the functions given. A test
    environment (``sagalog.testing``) stands stubs in for them, by effect name, and
    records each call with its key; everything around the call (the ledger, the
    intent, the breaker, the ``EffectRecorded``) is this class's as in production."""
    failed_probe: DependencyUnavailable | None = None
    """Set when a call of this handler probed a half-open breaker and failed, or failed
    as an outage opened the breaker: if the handler then fails retryably, the runtime
    defers the event without an attempt."""
    revealed: set[str] = field(default_factory=set)
    """The plaintexts ``reveal`` handed out: ``redact`` keeps them out of the failure
    texts the runtime writes to the log (``sagalog.personal.redaction``)."""
    _occurrences: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Its errors name the handler: the context itself knows only the workflow.
        self.workflow = self.workflow.read_by(Reader(self.agent, self.step, self.headers.type))

    @property
    def record_headers(self) -> dict[str, str]:
        """Every header of the triggering record as text (built on first use)."""
        return {
            k: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for k, v in self.raw_headers
            if v is not None
        }

    @property
    def workflow_id(self) -> str:
        return self.headers.workflow_id

    def content(self, value: str | bytes | BlobRef | Mapping[str, Any] | None) -> Any:
        """A field that may hold a blob (``docs/blobs.md``), as its content: a payload
        inline is returned as it is, a reference (a ``BlobRef``, or its record as the
        workflow's context holds it) is read from the blob store and checked against
        its hash: text for a ``text/*`` media type, bytes otherwise.

        Raises:
            NonRetryableError: no blob store is configured, or the blob no longer
                hashes to its reference; no retry mends either, so the event is
                dead-lettered with the reason.
            BlobMissing: the store has no such blob yet; retried with backoff (a shared
                volume may not have it yet), then dead-lettered.
        """
        if value is None or isinstance(value, (str, bytes)):
            return value
        ref = value if isinstance(value, BlobRef) else BlobRef.from_avro(value)
        if self.blobs is None:
            raise NonRetryableError(
                f"workflow {self.workflow_id}: the event holds {ref}, and agent "
                f"{self.agent} has no blob store: set SAGALOG_BLOB_DIR or SAGALOG_BLOB_URL "
                "to the store its writers use"
            )
        try:
            return ref.content(self.blobs.get(ref))
        except BlobModified as exc:
            raise NonRetryableError(str(exc)) from exc

    def reveal(self, value: Any) -> Any:
        """A personal-data field (``docs/personal-data.md``) in clear: its envelope
        opened with the subject's key, ``ERASED`` when the subject was erased, and a
        value in clear as it is. Call it only where the plaintext is needed (an e-mail
        to send, a system of record to fill): copying the field to an output needs no
        key, since the envelope passes through.

        Raises:
            NonRetryableError: the value is sealed and the agent has no key, or the
                envelope does not open (altered); no retry mends either.
        """
        if self.personal_data is None:
            if parse_envelope(value) is None:
                return value
            raise NonRetryableError(
                f"workflow {self.workflow_id}: agent {self.agent} reads a personal-data "
                "field and has no key: set SAGALOG_PERSONAL_DATA_KEY_FILE to the file its "
                "writers use"
            )
        try:
            opened = self.personal_data.open_value(value)
        except PersonalDataError as exc:
            raise NonRetryableError(str(exc)) from exc
        if isinstance(opened, str) and opened != ERASED:
            self.revealed.add(opened)
        return opened

    def redact(self, text: str) -> str:
        """``text`` without the personal data this handler revealed: a failure's text
        goes to the log, where only a sealed value may hold it."""
        return redact(text, self.revealed) if self.revealed else text

    @property
    def event_id(self) -> str:
        """The handled event's id, which its effects' idempotency keys are made of."""
        return self.rerun_of or self.headers.id

    async def effect(
        self,
        name: str,
        call: Callable[..., Any],
        *args: Any,
        dependency: str | None = None,
        lookup: Callable[..., Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Perform ``call(*args, idempotency_key=key, **kwargs)`` at most once in effect.

        The call's intent is written down (synced) before it is made, and a call whose
        result was never recorded (the process died during it) is reconciled before
        anything is called again (see ``sagalog.agents.intents``).

        Args:
            name: names the effect (``ledger.reserve``); part of the key.
            call: the function reaching the dependency; sync or async. It must accept an
                ``idempotency_key`` keyword and pass it on (an HTTP header, a request
                id), so a repeat after a crash is recognized by the dependency.
            dependency: the dependency's name for its circuit breaker and rate limit
                (defaults to the part of ``name`` before the first dot).
            lookup: ``lookup(idempotency_key=key)``, sync or async, asks the dependency
                for the result of an earlier call with ``key``; it returns None when the
                dependency has none. Offered, it settles an unanswered intent without
                calling again; otherwise the call is repeated with the same key.

        Raises:
            DependencyUnavailable: the dependency's breaker is open or its rate budget
                is spent; the runtime defers the event without counting an attempt.
            Exception: whatever ``call`` or ``lookup`` raises; the runtime classifies
                and retries it.
        """
        key = self._next_key(name)
        return await self._effect(name, key, call, args, kwargs, dependency, lookup)

    def _next_key(self, name: str) -> str:
        occurrence = self._occurrences.get(name, 0)
        self._occurrences[name] = occurrence + 1
        return idempotency_key(
            agent=self.agent, event_id=self.event_id, effect=name, occurrence=occurrence
        )

    async def _effect(
        self,
        name: str,
        key: str,
        call: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        dependency: str | None,
        lookup: Callable[..., Any] | None,
        spends: Callable[[Any], list[Spend]] | None = None,
        before_call: Callable[[], Awaitable[None]] | None = None,
    ) -> Any:
        """``effect`` with its key chosen; ``spends(result)``, for a model call, are the
        budget claims its ``EffectRecorded`` carries, and ``before_call()`` writes its
        claim where a successor reads it, right before the call goes out."""
        recorded = self.store.effect_result(key)
        if recorded is not None:
            if self.delivery is not None and recorded.get("delivery") == str(self.delivery):
                # Recorded while handling this very record, whose transaction then
                # aborted or never committed (a crash): its EffectRecorded is not in the
                # log yet. From an earlier record (a retry), the log already has it.
                intent = recorded.get("intent")
                self._record(
                    name,
                    key,
                    recorded["result"],
                    intent=None if intent is None else EffectIntent.from_dict(intent),
                    reconciliation=recorded.get("reconciliation"),
                    spends=[Spend.from_dict(d) for d in recorded.get("spends", ())],
                )
            return recorded["result"]
        dependency = dependency or name.split(".", 1)[0]
        if self.perform is not None:
            call, lookup = self.perform(self, name, call, lookup)
        personal = self.personal_data
        digest = arguments_digest(args, kwargs, keyed=None if personal is None else personal.digest)
        earlier = self.store.effect_intent(key)
        await self.flow.admit(dependency, key=self.event_id)
        self.effects_called += 1
        unpaced: DependencyUnavailable | None = None
        try:
            if earlier is None:
                intent = EffectIntent(
                    effect=name,
                    dependency=dependency,
                    arguments_sha256=digest,
                    intended_at_ms=int(self.clock().timestamp() * 1000),
                    attempt=self.attempt,
                )
                self.store.record_intent(key, intent)
                settlement = None
                if before_call is not None:
                    await before_call()
                result = await _invoke(call, *args, idempotency_key=key, **kwargs)
            else:
                intent = earlier
                found = None
                if lookup is None:
                    settlement = Settlement.CALLED_AGAIN
                else:
                    found = await _invoke(lookup, idempotency_key=key)
                    settlement = settlement_of_lookup(found)
                if settlement is Settlement.FOUND:
                    result = found
                else:
                    if lookup is not None:
                        try:
                            await self.flow.pace(dependency)  # a second call: its own slot
                        except DependencyUnavailable as exc:
                            unpaced = exc
                            raise
                    if before_call is not None:
                        await before_call()
                    result = await _invoke(call, *args, idempotency_key=key, **kwargs)
        except NonRetryableError:
            # The dependency answered, with a refusal of this request (a 4xx): it is
            # up. Counting refusals would let a run of bad requests open the breaker
            # and hold back every other workflow's calls.
            self.flow.succeeded(dependency)
            raise
        except BaseException as exc:
            if exc is unpaced:
                # The lookup was answered (the dependency is up; a probe reports so)
                # and the call has no rate slot soon: deferred, the intent stays.
                self.flow.succeeded(dependency)
                raise
            # A cancelled call (the step timed out) counts against the dependency too,
            # and every admitted half-open probe must report back.
            self.flow.failed(dependency, key=self.event_id)
            breaker = self.flow.breaker(dependency)
            # The dependency's failure, not this request's (``CircuitBreaker.is_outage``:
            # others fail too, or nobody got an answer lately, a failed probe included):
            # no attempt of this event is spent, or the first events of an outage would
            # use up their attempts before the breaker opened and fail (a chaos round saw
            # a compensation dead-lettered so). A probe that fails alone while others get
            # answers, or past the doubt, is an attempt: a bad request that opened the
            # breaker itself must not probe for free forever.
            if breaker.is_outage(self.event_id):
                soon = breaker.clock() + breaker.policy.open_for_s / 10
                self.failed_probe = DependencyUnavailable(
                    dependency, retry_at=max(breaker.retry_at(), soon)
                )
            raise
        self.flow.succeeded(dependency)
        reconciliation = (
            None if settlement is None else describe(settlement, intent, arguments_sha256=digest)
        )
        claims = [] if spends is None else spends(result)
        self.store.record_effect(
            key,
            result,
            delivery="" if self.delivery is None else str(self.delivery),
            intent=intent,
            reconciliation=reconciliation,
            spends=[c.as_dict() for c in claims],
        )
        self._record(name, key, result, intent=intent, reconciliation=reconciliation, spends=claims)
        return result

    async def model_call(
        self,
        budget: str,
        call: Callable[..., Any],
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        tools: Sequence[Mapping[str, Any]] | None = None,
        name: str | None = None,
        dependency: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """A chat call to a model, under ``budget``, as an effect (``effect``).

        Before the call, its estimate (the prompt counted with the model's tokenizer,
        plus all of ``max_tokens``: ``budgets.estimate``) is reserved in the budget's
        ledger under the effect's idempotency key, kept with the event's input
        partition, and written, acknowledged, to the agent's claims topic, where the
        partition's next holder reads it. The answer's ``usage`` settles it; the
        claim goes to the log in the call's ``EffectRecorded``. A redelivered event
        gets the recorded answer and counts nothing; a call repeated because its
        first answer was lost (a crash, here or on the instance that held the
        partition before) is a second spend, counted as one: the model may have
        served both.

        ``call(model=, messages=, max_tokens=, [tools=,] idempotency_key=, **kwargs)``
        reaches the model and returns its answer: the JSON of an OpenAI-compatible
        chat completion as a dict (or an object with a ``usage``).

        Raises:
            BudgetWait: no room in the window now and the flow says ``wait``: the
                event is deferred, without an attempt, to when the window has room.
            BudgetRefused: no room now and the flow says ``fail``: the step fails.
            NonRetryableError: the budget is not declared, the call is wrong
                (``max_tokens``, a message), or its estimate alone is over a
                partition's part of the limit: it could never be made.
        """
        return await self._model_call(
            budget, call, model, messages, max_tokens, tools, name, dependency, None, kwargs
        )

    def model_stream(
        self,
        budget: str,
        call: Callable[..., Any],
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        tools: Sequence[Mapping[str, Any]] | None = None,
        name: str | None = None,
        dependency: str | None = None,
        **kwargs: Any,
    ) -> ModelStream:
        """``model_call``, its answer read as the model writes it (``agents.model_stream``).

        ``call`` is asked with ``stream=True`` and ``on_delta`` (``ChatModel.chat``);
        each text delta goes to the handler (``async for text in stream``) and to the
        workflow's stream topic, where the gateway serves it
        (``GET /v1/workflows/{id}/stream``). Budget, claim, record and errors are
        ``model_call``'s; ``stream.completion`` is its answer.
        """
        return ModelStream(
            lambda on_text: self._model_call(
                budget, call, model, messages, max_tokens, tools, name, dependency, on_text, kwargs
            )
        )

    async def _model_call(
        self,
        budget: str,
        call: Callable[..., Any],
        model: str,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        tools: Sequence[Mapping[str, Any]] | None,
        name: str | None,
        dependency: str | None,
        on_text: OnText | None,
        kwargs: dict[str, Any],
    ) -> Any:
        effect = name or f"model.{budget}"
        key = self._next_key(effect)
        arguments: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            **({} if tools is None else {"tools": list(tools)}),
            **kwargs,
        }
        if self.store.effect_result(key) is not None:  # done before: nothing to reserve
            return await self._effect(effect, key, call, (), arguments, dependency, None)
        origin = self.origin
        assert origin is not None, "a model call is made while handling a consumed event"
        claim, price, repeat = await self._reserve(
            budget, key, origin, messages, model, max_tokens, tools
        )
        if on_text is not None:
            publisher = StreamPublisher(
                self.write_stream,
                topic=origin.topic,
                partition=origin.partition,
                workflow_id=self.workflow_id,
                step=self.step,
                agent=self.agent,
                call=key,
                attempt=attempt_of(claim.reservation, key),
            )
            if repeat:  # the attempt before was cut off where this process cannot see
                publisher.earlier_cut_off()
            call = streaming(call, publisher, on_text)
        called = False

        async def before_call() -> None:
            nonlocal called
            if self.write_claim is not None:
                await self.write_claim(ClaimNote(origin.topic, origin.partition, claim))
            called = True

        def settle(result: Any) -> list[Spend]:
            now = self._now_ms()
            used = reported_usage(result, price) or claim.estimate
            settled = replace(claim, actual=used, answered_ms=now)
            assert self.budgets is not None
            self.budgets.settle(settled, origin.partition, now_ms=now)
            self.store.record_spend(origin.topic, origin.partition, settled)
            if not repeat:
                return [settled]
            others = self.store.spends_of(origin.topic, origin.partition, key)
            return [settled, *(s for s in others if s.reservation != claim.reservation)]

        try:
            return await self._effect(
                effect,
                key,
                call,
                (),
                arguments,
                dependency,
                None,
                spends=settle,
                before_call=before_call,
            )
        except BaseException as exc:
            refused = isinstance(exc, NonRetryableError)
            if called and not refused:
                raise  # the model may have served it: the claim stands
            # Never sent (a breaker, a rate limit, the claim's own write), or refused
            # by the model's API (a 4xx): nothing was served, nothing spent.
            assert self.budgets is not None
            self.budgets.release(claim, origin.partition, now_ms=self._now_ms())
            self.store.drop_spend(origin.topic, origin.partition, claim)
            if called and self.write_claim is not None:
                with contextlib.suppress(Exception):  # unwritten: counted, never under
                    await self.write_claim(
                        ClaimNote(origin.topic, origin.partition, claim, released=True)
                    )
            raise

    async def _reserve(
        self,
        budget: str,
        key: str,
        origin: RecordPosition,
        messages: Sequence[Mapping[str, Any]],
        model: str,
        max_tokens: int,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> tuple[Spend, Price, bool]:
        """Reserve a model call's estimate, and keep the claim: synced here when no
        intent will be (a repeat of a call whose answer was lost). Also says whether
        the call is such a repeat, whose earlier claims go to the log with its own."""
        book = self.budgets
        declared = None if book is None else book.budgets.get(budget)
        if book is None or declared is None:
            known = ", ".join(sorted(book.budgets)) if book is not None else ""
            raise NonRetryableError(
                f"agent {self.agent} makes a model call under budget '{budget}', which it "
                f"does not declare (declared: {known or 'none'}); add it to "
                "Agent(budgets=[Budget.of(...)])"
            )
        try:
            ledger = declared.ledger_key(self)
            guess = estimate(
                messages, model=model, max_tokens=max_tokens, price=declared.price, tools=tools
            )
        except ConfigurationError as exc:
            raise NonRetryableError(f"model call under budget '{budget}': {exc}") from exc
        # A repeat: its first answer was lost, here (the intent of a call that never
        # answered) or on another instance (a claim of the key read from the claims
        # topic or the log, and no result here). The model may have served the first:
        # the repeat is a claim of its own, numbered after every earlier one.
        earlier = self.store.spends_of(origin.topic, origin.partition, key)
        repeat = bool(earlier) or self.store.effect_intent(key) is not None
        reservation = next_reservation(key, (spend.reservation for spend in earlier))
        claim, decision = await self._reserved(book, ledger, reservation, guess, origin.partition)
        if isinstance(decision, Exhausted):
            if self.on_budget_exhausted in ("fail", "gate"):
                raise self._refused(f"budget '{ledger}' is exhausted ({decision})")
            wait_s = max(0.0, (decision.retry_at_ms - claim.at_ms) / 1000)
            raise BudgetWait(ledger, str(decision), retry_at=self.monotonic() + wait_s)
        claim = replace(claim, at_ms=decision.reservation.at_ms)
        self.store.record_spend(origin.topic, origin.partition, claim, sync=repeat)
        return claim, declared.price, repeat

    async def _reserved(
        self, book: BudgetBook, ledger: str, reservation: str, guess: Usage, partition: int
    ) -> tuple[Spend, Granted | Exhausted]:
        """Reserve ``guess``; a window with room within ``max_rate_wait_s`` is waited
        for here, once, as a rate-limit slot is: deferring through the retry topic
        costs a round trip per refill, and refills come call by call."""
        for waited in (False, True):
            now = self._now_ms()
            claim = Spend(ledger, reservation, now, guess)
            try:
                decision = book.reserve(claim, partition, now_ms=now, force=self.over_budget)
            except BudgetExceeded as exc:
                never = f"{exc} (each of the input's partitions holds its part of the budget)"
                if self.on_budget_exhausted in ("fail", "gate"):  # a budget refusal too
                    raise self._refused(never) from exc
                raise NonRetryableError(never) from exc  # waiting would never end
            wait_s = (decision.retry_at_ms - now) / 1000 if isinstance(decision, Exhausted) else 0.0
            if waited or not 0 < wait_s <= self.flow.max_rate_wait_s:
                break
            await asyncio.sleep(wait_s)
        return claim, decision

    def _refused(self, why: str) -> BudgetRefused:
        """The step's refusal for want of budget, as its flow's policy (fail or gate) says."""
        policy = self.on_budget_exhausted
        gated = policy == "gate"
        then = f"; its gate {self.step}{BUDGET_GATE_SUFFIX} decides" if gated else ""
        return BudgetRefused(
            f"{why}; the flow says on_budget_exhausted: {policy} for step '{self.step}'{then}",
            gated=gated,
        )

    def _now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

    def _record(
        self,
        name: str,
        key: str,
        result: Any,
        *,
        intent: EffectIntent | None,
        reconciliation: str | None,
        spends: Sequence[Spend] = (),
    ) -> None:
        self.recorded.append(
            EffectRecorded(
                agent=self.agent,
                effect=name,
                idempotency_key=key,
                # A system's answer often echoes the request it was given: what the
                # handler revealed for the call must not enter the log in clear.
                result_json=self.redact(json.dumps(jsonable(result), default=str)),
                dependency=None if intent is None else intent.dependency,
                arguments_sha256=None if intent is None else intent.arguments_sha256,
                intended_at=None if intent is None else intent.intended_at,
                reconciliation=reconciliation,
                spends=[logged_claim(spend) for spend in spends] or None,
            )
        )

    def decision(
        self,
        *,
        model_id: str,
        prompt: str,
        input_refs: Sequence[str] = (),
        parameters: Mapping[str, Any] | None = None,
        template: str | None = None,
        inputs: Mapping[str, str | bytes] | None = None,
    ) -> DecisionLineage:
        """Lineage for a model call made while handling this event.

        ``input_refs`` default to the triggering event id; pass document or event ids
        the prompt was built from, and in ``inputs`` their content, to be hashed.
        ``parameters`` are the call's settings besides the messages; ``template``
        the prompt's fixed instructions.
        """
        return decision_lineage(
            model_id=model_id,
            prompt=prompt,
            input_refs=list(input_refs) or [self.event_id],
            decided_at=self.clock(),
            parameters=parameters,
            template=template,
            inputs=inputs,
        )


async def _invoke(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``function``, sync or async; a blocking one runs in a thread so the other
    handlers keep going."""
    if inspect.iscoroutinefunction(function):
        return await function(*args, **kwargs)
    result = await asyncio.to_thread(function, *args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def reported_usage(answer: Any, price: Price) -> Usage | None:
    """The usage a model's answer reports (OpenAI's ``usage``: ``prompt_tokens`` and
    ``completion_tokens``), priced; None when it reports none."""
    usage = answer.get("usage") if isinstance(answer, Mapping) else getattr(answer, "usage", None)
    if usage is None:
        return None

    def field_of(name: str) -> int:
        value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
        return int(value or 0)

    prompt, completion = field_of("prompt_tokens"), field_of("completion_tokens")
    return Usage(
        tokens=prompt + completion,
        micros=price.cost_micros(input_tokens=prompt, output_tokens=completion),
    )
