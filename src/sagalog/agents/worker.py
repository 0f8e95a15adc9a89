"""The agent worker: consume, handle, produce and commit in one Kafka transaction.

One iteration is one batch and one transaction:

1. poll up to ``max_batch`` committed records (inputs and the agent's retry topic);
2. fold every input event into the local projection, drop true duplicates (an event
   id first seen at an earlier offset), and pick the records this agent handles;
3. run the handlers, grouped by workflow: a workflow's events one after another, in
   order; different workflows concurrently, up to ``max_in_flight``, highest
   priority lane first;
4. in one transaction, produce the outputs, the retries, the dead letters and the
   ``StepFailed`` events, and commit the consumed offsets; then checkpoint the
   projection.

If the transaction aborts, nothing it produced is visible and the consumer rewinds
to the committed offsets: the batch runs again, and the effect ledger keeps
confirmed side effects from repeating. A fenced producer means another instance with
the same ``transactional.id`` took over: this one is a zombie and stops.

A broker's loss and return is ridden out in-process: a fatal consumer (a static
member fenced by its own rejoin) or a client call that timed out outside the
transaction closes both clients and builds new ones, with backoff, for up to
``outage_limit_s``; see ``recovery`` for why and what that keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from sagalog.agents.backoff import RetryPolicy, retry_within
from sagalog.agents.circuit_breaker import BreakerPolicy, BreakerState
from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent, HandlerSpec
from sagalog.agents.failures import DependencyUnavailable, StepTimeout, is_retryable
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.hydration import hydrate
from sagalog.agents.internal_topics import ensure_internal_topics
from sagalog.agents.records import headers_of, offset_of, partition_of, topic_of
from sagalog.agents.recovery import FENCED_INSTANCE_ID, RejoinBudget
from sagalog.agents.routing import (
    dead_letter_headers,
    read_mark,
    retry_headers,
    retry_topic_for,
)
from sagalog.agents.settings import AgentSettings
from sagalog.agents.state_store import StateStore, WorkflowContext
from sagalog.agents.telemetry import (
    AgentTelemetry,
    configure_logging,
    current_traceparent,
    ensure_tracer_provider,
)
from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import content_hash, signed
from sagalog.contracts.headers import H_TYPE, EventHeaders, header_value
from sagalog.contracts.models import Event
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import (
    EventValidationError,
    SagalogError,
    SchemaError,
    ServiceUnavailableError,
)
from sagalog.events import StepFailed
from sagalog.health import Health, HealthBook
from sagalog.priority import Priority, schedule

_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
_BROKER_AWAY = {KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT}
_OUTAGE_BACKOFF = RetryPolicy(base_delay_s=0.5, max_delay_s=10.0)
OutRecord = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes | str | None]]]


class ZombieFenced(SagalogError):
    """Another instance with this ``transactional.id`` took over; this one must stop."""

    exit_code = 70


def _fatal(error: KafkaError) -> bool:
    """A consumer's fatal error arrives as ``_FATAL`` (whose ``fatal()`` is False) or flagged."""
    return bool(error.fatal()) or error.code() == KafkaError._FATAL


class ConsumerFailed(SagalogError):
    """The consumer hit a fatal error (librdkafka cannot go on with it).

    Seen when the broker restarts under a static member: the consumer comes back
    "fenced by other consumer with same group.instance.id" (itself, rejoining), and a
    fatal consumer refuses every later call, so an agent that only logged it would
    sit alive and idle while its workflows waited. The worker builds new clients
    (``recovery``); it exits 70 with this only past ``max_rejoins``.
    """

    exit_code = 70


class ClientHung(SagalogError):
    """A librdkafka call blocked past its bound; the worker abandons it and builds new
    clients (exit 70 only if that, too, fails for ``outage_limit_s``: see ``_connect``)."""

    exit_code = 70


class TransactionTimedOut(SagalogError):
    """The coordinator aborted a transaction that outlived its timeout; new clients cure it."""

    exit_code = 70


@dataclass
class _Item:
    """One record this agent handles in the current batch."""

    message: Message
    headers: EventHeaders
    spec: HandlerSpec
    event: Event
    attempt: int
    origin: str  # topic/partition/offset of the input record
    origin_topic: str
    from_retry: bool
    priority: int
    context: WorkflowContext | None = None
    cause_hash: str | None = None  # the input's content hash: its outputs' prev_hash


@dataclass
class _Outcome:
    """What became of one record; ``records`` are produced in the transaction."""

    kind: str  # ok | retry | defer | park | dead | duplicate | ignored
    records: list[OutRecord] = field(default_factory=list)
    error: str = ""
    duration_ms: float = 0.0
    step: str | None = None
    attempt: int | None = None


class AgentWorker:
    """Runs one instance of an agent until stopped."""

    def __init__(
        self,
        agent: Agent,
        settings: AgentSettings,
        *,
        catalog: SchemaCatalog | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.agent = agent
        self.settings = settings
        self.catalog = catalog or SchemaCatalog.load(Path(settings.project_dir) / "schemas")
        agent.check(self.catalog)
        self.codec = EventCodec(catalog=self.catalog, registry=SchemaRegistry(settings))
        self.clock = clock
        self.wall_ms = wall_ms
        self.source = f"sagalog/{agent.name}"
        self.group_id = settings.group_id or f"sagalog-agent-{agent.name}"
        self.transactional_id = f"sagalog-agent-{agent.name}-{settings.instance_id}"
        self.retry_topic = retry_topic_for(agent.name)
        self.policy = RetryPolicy(
            max_attempts=settings.max_attempts,
            base_delay_s=settings.retry_base_delay_s,
            max_delay_s=max(settings.retry_max_delay_s, settings.retry_base_delay_s),
        )
        self.flow = FlowControl(
            breaker_policy=BreakerPolicy(
                failure_threshold=settings.breaker_failure_threshold,
                open_for_s=settings.breaker_open_for_s,
            ),
            rate_limits=settings.rate_limits,
            max_rate_wait_s=settings.max_rate_wait_s,
            clock=clock,
        )
        self.telemetry = AgentTelemetry(agent=agent.name, instance=settings.instance_id)
        self.flow.on_breaker_change = self._breaker_changed
        self.stats = self.telemetry.stats
        self.store: StateStore | None = None
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._paused_until: dict[tuple[str, int], int] = {}
        self._to_hydrate: dict[tuple[str, int], int] = {}
        self._stopping = False
        self._stop_requested_at: float | None = None
        self._consumer_fatal: KafkaError | None = None  # set by librdkafka's error callback
        self._assign_failed: KafkaException | None = None  # set by the assignment callback
        self._txn_started = float("inf")  # when the open transaction began (clock)
        self._uncommitted_since: float | None = None  # skipped records' offsets wait since
        self._batch_started = float("-inf")
        self._loop = asyncio.new_event_loop()
        self._helper = ThreadPoolExecutor(1, thread_name_prefix=f"sagalog-{agent.name}-bounded")
        self.health = HealthBook(clock=clock, on_change=self._health_changed)
        self.rejoins = RejoinBudget(limit=settings.max_rejoins)

    # -- lifecycle --------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the worker to finish its batch, commit and exit (SIGTERM does this)."""
        self._stopping = True

    def run(self, *, install_signals: bool = True) -> None:
        """Consume until stopped. Blocks.

        Raises:
            ZombieFenced: a newer instance with the same instance id took over.
        """
        configure_logging(json_lines=self.settings.log_json, level=self.settings.log_level)
        ensure_tracer_provider()
        if install_signals:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        partitions = ensure_internal_topics(
            self.settings,
            inputs=self.agent.topics,
            retry_topic=self.retry_topic,
            deadletter_topic=self.settings.deadletter_topic,
        )
        self.partitions = partitions
        self.store = StateStore(
            self.settings.data_dir / self.agent.name / self.settings.instance_id,
            folded_types=self.agent.folded_types(),
        )
        self._connect()
        self.telemetry.log("start", f"agent {self.agent.name} started", outcome="ok")
        started_stopping: float | None = None
        try:
            while not self._stopping:
                try:
                    self._iteration()
                except ConsumerFailed as exc:
                    self._recover(exc, fenced=True)
                except (
                    KafkaException,
                    ServiceUnavailableError,
                    ClientHung,
                    TransactionTimedOut,
                ) as exc:
                    self._recover(exc, fenced=False)
            started_stopping = self.clock()
        finally:
            self._shutdown(started_stopping)

    def _connect(self) -> None:
        """A transactional producer and a subscribed consumer, retried with backoff
        while the broker does not answer, for at most ``outage_limit_s``.

        Raises:
            ServiceUnavailableError: the broker did not answer within the bound (exit 3).
        """

        def attempt() -> None:
            # The producer first: its init_transactions fences a predecessor with the
            # same transactional.id (an earlier client of this process included) and
            # aborts the transaction it left open.
            self._producer = self._new_producer()
            self._consumer = self._new_consumer()

        def retrying(attempt: int, exc: BaseException, delay: float) -> None:
            self.health.degrade("kafka", str(exc))
            self.telemetry.log(
                "connect",
                f"the broker did not answer ({exc}); trying again in {delay:.1f}s",
                level=logging.WARNING,
                outcome="retry",
                attempt=attempt,
            )

        try:
            retry_within(
                attempt,
                policy=_OUTAGE_BACKOFF,
                within_s=self.settings.outage_limit_s,
                retry_on=(KafkaException,),
                on_retry=retrying,
            )
        except KafkaException as exc:
            raise ServiceUnavailableError(
                f"agent '{self.agent.name}' instance '{self.settings.instance_id}': Kafka at "
                f"{self.settings.bootstrap_servers} did not answer for "
                f"{self.settings.outage_limit_s:g}s (SAGALOG_AGENT_OUTAGE_LIMIT_S): {exc}"
            ) from exc

    def _recover(self, exc: SagalogError | KafkaException, *, fenced: bool) -> None:
        """Close both clients and build new ones; the projection and the ledger stay.

        Raises:
            ConsumerFailed: fenced more than ``max_rejoins`` times in ten minutes.
            ServiceUnavailableError: the broker did not answer for ``outage_limit_s``.
        """
        if fenced and not self.rejoins.take(self.clock()):
            raise ConsumerFailed(
                f"agent '{self.agent.name}' instance '{self.settings.instance_id}': the "
                f"consumer was fenced {self.settings.max_rejoins + 1} times in ten minutes "
                f"({exc}); another live instance may have this instance id. Give every "
                f"instance its own SAGALOG_AGENT_INSTANCE_ID; exiting {ConsumerFailed.exit_code}"
            ) from exc
        self.stats.rebuilt += 1
        self.health.degrade("kafka", str(exc))
        self.telemetry.log(
            "recover",
            f"{exc}; closing the consumer and the producer and building new ones (offsets "
            "resume from the committed ones, the projection stays)",
            level=logging.WARNING,
            outcome="rebuild",
        )
        self._drop_clients()
        self._connect()

    def _drop_clients(self) -> None:
        """Forget the clients; close them in a thread that may hang without holding us.

        The old producer is not flushed nor its transaction aborted (both wait for the
        broker): the next producer's init_transactions aborts it on the broker.
        """
        consumer, producer = self._consumer, self._producer
        self._consumer = self._producer = None
        self._consumer_fatal = None
        self._assign_failed = None
        self._paused_until.clear()
        self._to_hydrate.clear()
        self._uncommitted_since = None  # the skipped records are read again: harmless
        self.flow.rebalance(assigned=0, total=self.partitions)

        def close() -> None:
            # The old producer's transaction is aborted here if it can be (its calls
            # done, the broker there), before the next producer exists: a request of
            # the old one that lands after the next one's init_transactions can leave
            # an offset commit hanging (``_resolve_hanging_offsets``).
            with contextlib.suppress(Exception):
                if producer is not None:
                    producer.abort_transaction(min(5.0, self.settings.connect_timeout_s))
            with contextlib.suppress(Exception):
                if consumer is not None:
                    consumer.close()
            with contextlib.suppress(Exception):
                if producer is not None:
                    producer.purge()

        closing = threading.Thread(target=close, name="sagalog-close-clients", daemon=True)
        closing.start()
        closing.join(self.settings.connect_timeout_s)

    def _new_consumer(self) -> Consumer:
        consumer = Consumer(
            self.settings.kafka_config(
                **{
                    "group.id": self.group_id,
                    # Static membership: a restarted instance takes its partitions back at
                    # once instead of waiting out its dead self's session, and a paused
                    # zombie is fenced out of the group as well as out of transactions.
                    "group.instance.id": self.transactional_id,
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    # range keeps partition i of every input and of the retry topic on one
                    # instance, so a workflow's projection, retries and parking live together.
                    "partition.assignment.strategy": "range",
                    "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 1000,
                    # The broker answers a waiting fetch as soon as a record is readable
                    # (a transaction's commit marker included), so a short wait buys no
                    # latency while records flow, and 20 ms cost the broker ~3.5% of a
                    # core per idle agent in empty fetches (five idle consumers: 17%; at
                    # 100 ms: within noise of none). Not librdkafka's 500 ms either: a
                    # partition resumed or assigned meanwhile waits for the fetch in
                    # flight, and a rate-limited agent idle that long refills its burst.
                    "fetch.wait.max.ms": 100,
                    "enable.partition.eof": False,
                    "error_cb": self._on_consumer_error,
                }
            )
        )
        consumer.subscribe(
            [*self.agent.topics, self.retry_topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        return consumer

    def _on_consumer_error(self, error: KafkaError) -> None:
        """librdkafka's client-level errors: a fatal one rebuilds the clients
        (``ConsumerFailed``); all brokers away degrades the health."""
        if _fatal(error):
            self._consumer_fatal = error
        elif error.code() in _BROKER_AWAY:
            self.health.degrade("kafka", error.str())

    def _health_changed(self, before: Health, after: Health, why: str) -> None:
        self.telemetry.log(
            "health",
            f"health {before} -> {after}: {why}",
            level=logging.WARNING if after is Health.DEGRADED else logging.INFO,
            transition=f"{before}->{after}",
            outcome=str(after),
        )

    def _answered(self) -> None:
        """The broker answered the group or a transaction: the outage, if any, is over."""
        if not self.health.started:
            self.health.ready()
        down_s = self.health.recover("kafka")
        if down_s is not None:
            self.telemetry.log(
                "recovered",
                f"the broker answers again after {down_s:.1f}s",
                duration_ms=round(down_s * 1000, 1),
                outcome="ok",
            )

    def _raise_if_consumer_failed(self, error: KafkaError | None = None) -> None:
        error = error if error is not None and _fatal(error) else self._consumer_fatal
        if error is None:
            return
        self.telemetry.log(
            "consume", f"fatal consumer error: {error.str()}", level=logging.ERROR, outcome="error"
        )
        if error.code() == FENCED_INSTANCE_ID:
            self.telemetry.log(
                "consume",
                "the static member was fenced by its own rejoin (the group coordinator moved "
                "or restarted; see sagalog.agents.recovery)",
                level=logging.WARNING,
                outcome="fenced",
            )
        raise ConsumerFailed(
            f"agent '{self.agent.name}' instance '{self.settings.instance_id}': fatal consumer "
            f"error ({error.str()}): nothing uncommitted is lost, the batch is redelivered"
        )

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping:  # a second signal: stop now, uncommitted work is redelivered
            raise KeyboardInterrupt
        self.telemetry.log("stop", f"received signal {signum}; finishing the batch")
        self._stopping = True
        self._stop_requested_at = self.clock()

    def _shutdown(self, started: float | None) -> None:
        with contextlib.suppress(Exception):
            if self._uncommitted_since is not None and self._consumer is not None:
                self._commit([])  # the skipped records' offsets, so no one reads them again
        with contextlib.suppress(Exception):
            if self._consumer is not None:
                self._consumer.close()
        with contextlib.suppress(Exception):
            if self._producer is not None:
                self._producer.flush(5)
        if self.store is not None:
            self.store.close()
        self._helper.shutdown(wait=False)
        took = 0.0 if started is None else (self.clock() - started) * 1000
        counts = ", ".join(f"{name} {value}" for name, value in vars(self.stats).items())
        self.telemetry.log(
            "stop",
            f"agent {self.agent.name} stopped; {counts}",
            duration_ms=round(took, 1),
            outcome="ok",
        )

    def _new_producer(self) -> Producer:
        producer = Producer(
            self.settings.producer_config(
                **{
                    "transactional.id": self.transactional_id,
                    "linger.ms": 1,
                    # Right after a commit the coordinator answers CONCURRENT_TRANSACTIONS
                    # until its markers are written; librdkafka's 100 ms default backoff
                    # then costs ~50-100 ms per transaction (confluent-kafka-python #967).
                    "retry.backoff.ms": 5,
                    "transaction.timeout.ms": int(self.settings.transaction_timeout_s * 1000),
                }
            )
        )
        try:
            producer.init_transactions(self.settings.connect_timeout_s * 3)
        except KafkaException as exc:
            if is_authorization_failure(exc.args[0]):
                raise authorization_error(
                    self.settings, exc.args[0], operation="WRITE", resource=self.transactional_id
                ) from exc
            raise
        return producer

    # -- rebalance ----------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self.store is not None
        consumer.assign(partitions)
        inputs = [tp for tp in partitions if tp.topic in self.agent.topics]
        try:
            committed = (
                consumer.committed(inputs, timeout=self.settings.connect_timeout_s)
                if inputs
                else []
            )
        except KafkaException as exc:
            # Raised inside librdkafka's callback it would leave poll() as a bare
            # KafkaError, which no except clause catches (seen: the agent died, exit 1,
            # "Failed to get committed offsets: Local: Timed out" after a broker restart).
            # Nothing flows unchecked: the partitions stay paused until the clients are
            # built anew (the iteration raises it, the run loop rebuilds).
            consumer.pause(partitions)
            self._assign_failed = exc
            return
        behind = []
        for tp in committed:
            checkpoint = self.store.checkpoint(tp.topic, tp.partition)
            if tp.offset > checkpoint:
                self._to_hydrate[(tp.topic, tp.partition)] = tp.offset
                behind.append(TopicPartition(tp.topic, tp.partition))
        if behind:
            consumer.pause(behind)
        first = self.agent.topics[0]
        assigned = sum(1 for tp in partitions if tp.topic == first)
        self.flow.rebalance(assigned=assigned, total=self.partitions)
        self.telemetry.log(
            "rebalance",
            f"assigned {len(partitions)} partition(s), {len(behind)} to hydrate",
            outcome="assigned",
        )
        self._answered()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._paused_until.pop((tp.topic, tp.partition), None)
            self._to_hydrate.pop((tp.topic, tp.partition), None)
        # The rate share shrinks with the partitions as they go, not at the next
        # assignment: the members that take them over start spending their share then.
        first = self.agent.topics[0]
        revoked = {tp.partition for tp in partitions if tp.topic == first}
        kept = sum(
            1 for tp in consumer.assignment() if tp.topic == first and tp.partition not in revoked
        )
        self.flow.rebalance(assigned=kept, total=self.partitions)
        self.telemetry.log(
            "rebalance", f"revoked {len(partitions)} partition(s)", outcome="revoked"
        )

    def _hydrate_pending(self) -> None:
        """Rebuild the projection of newly assigned partitions up to their committed
        offsets, then let them flow: a handler never sees a context missing events
        that were handled before."""
        assert self._consumer is not None and self.store is not None
        if not self._to_hydrate:
            return
        targets = dict(self._to_hydrate)
        self._to_hydrate.clear()
        folded = hydrate(
            self.settings, self.store, targets, read_ahead_kb=self.settings.rebuild_read_ahead_kb
        )
        self._consumer.resume([TopicPartition(t, p) for t, p in targets])
        self.telemetry.log("hydrate", f"folded {folded} event(s) into the projection", outcome="ok")

    # -- one batch ------------------------------------------------------------------------

    def _iteration(self) -> None:
        assert self._consumer is not None
        self._resume_due()
        self._hydrate_pending()
        messages = self._poll()
        if self._assign_failed is not None:
            failed = self._assign_failed
            if failed.args and failed.args[0].code() == KafkaError._TIMED_OUT:
                self._resolve_hanging_offsets()
            raise failed
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(message)
            elif error.code() != KafkaError._PARTITION_EOF:
                self._raise_if_consumer_failed(error)
                if is_authorization_failure(error):  # a missing ACL does not heal by retrying
                    raise authorization_error(
                        self.settings,
                        error,
                        operation="READ",
                        resource=message.topic() or self.group_id,
                    )
                self.telemetry.log(
                    "consume",
                    f"consumer error: {error.str()}",
                    level=logging.WARNING,
                    outcome="error",
                )
        self._raise_if_consumer_failed()
        if records:
            self._process(records)
        self._commit_waiting_offsets()

    def _poll(self) -> list[Message]:
        """Wait for the first record, then gather the batch: at most one batch starts
        per ``batch_interval_s``.

        ``consume(n, timeout)`` returns only when it has ``n`` records or the timeout
        ran out, so asking it for a whole batch made every hand-off wait out the poll
        timeout unless hundreds of records were queued, busy or not. Now an agent that
        was idle handles a record the moment it comes; under load, a record waits at
        most the rest of the interval, and what came meanwhile joins its batch (one
        transaction, one projection write), which is what keeps the broker's and the
        agent's work per record small.
        """
        assert self._consumer is not None
        first = self._consumer.poll(self.settings.poll_timeout_s)
        if first is None:
            return []
        if self.settings.max_batch == 1:
            self._batch_started = self.clock()
            return [first]
        wait = self._batch_started + self.settings.batch_interval_s - self.clock()
        more = self._consumer.consume(self.settings.max_batch - 1, max(0.0, wait))
        self._batch_started = self.clock()
        return [first, *more]

    def _resume_due(self) -> None:
        assert self._consumer is not None
        now = self.wall_ms()
        due = [key for key, at in self._paused_until.items() if at <= now]
        if due:
            self._consumer.resume([TopicPartition(t, p) for t, p in due])
            for key in due:
                del self._paused_until[key]

    def _hold_until_due(self, records: list[Message]) -> list[Message]:
        """Drop retry records that are not due yet, pausing their partition until they
        are; later records of that partition wait behind them."""
        assert self._consumer is not None
        now = self.wall_ms()
        held: set[tuple[str, int]] = set()
        kept = []
        retry_topic = self.retry_topic
        for message in records:
            key = (topic_of(message), partition_of(message))
            if key in held:
                continue
            if key[0] == retry_topic:
                mark = read_mark(headers_of(message))
                if mark is not None and mark.not_before_ms > now:
                    tp = TopicPartition(key[0], key[1], offset_of(message))
                    self._consumer.pause([tp])
                    self._consumer.seek(tp)
                    self._paused_until[key] = mark.not_before_ms
                    held.add(key)
                    continue
            kept.append(message)
        return kept

    def _process(self, messages: list[Message]) -> None:
        assert self.store is not None
        try:
            self._process_batch(messages)
        finally:
            # The batch's projection changes (and, committed, its checkpoint) in one
            # write. Folding is right whatever became of the transaction: the inputs
            # are committed records, and a replay folds nothing twice.
            self.store.flush()

    def _process_batch(self, messages: list[Message]) -> None:
        assert self.store is not None
        records = self._hold_until_due(messages)
        outcomes: list[tuple[Message, _Outcome]] = []
        items: list[_Item] = []
        for message in records:
            item_or_outcome = self._classify(message)
            if isinstance(item_or_outcome, _Item):
                items.append(item_or_outcome)
            else:
                outcomes.append((message, item_or_outcome))
        handled = self._loop.run_until_complete(self._run_items(items)) if items else []
        if self._stopping and handled is None:
            return  # shutdown budget spent: nothing committed, the batch is redelivered
        for item, outcome in handled or []:
            outcomes.append((item.message, outcome))
            self._before_commit(item, outcome)
        if not items and not any(o.records for _, o in outcomes):
            # Nothing to produce (the usual batch of an agent that handles one type in
            # six): a transaction would only move offsets, at four round trips and a
            # marker per partition on the broker. Its offsets ride with the next.
            if self._uncommitted_since is None:
                self._uncommitted_since = self.clock()
        elif not self._commit([o for _, o in outcomes]):
            return
        self._after_commit(records, items, handled or [])
        for message, outcome in outcomes:
            self._account(message, outcome)

    def _classify(self, message: Message) -> _Item | _Outcome:
        """Fold an input into the projection and decide whether a handler runs."""
        assert self.store is not None
        raw_headers = headers_of(message)
        topic = topic_of(message)
        if topic != self.retry_topic:
            event_type = header_value(raw_headers, H_TYPE)
            if event_type and not self.store.keeps(event_type):
                return _Outcome("ignored")  # neither handled nor read: skipped from ce_type
        partition, offset = partition_of(message), offset_of(message)
        origin = f"{topic}/{partition}/{offset}"
        try:
            headers = EventHeaders.from_kafka(raw_headers)
        except EventValidationError as exc:
            return self._dead_record(message, reason=str(exc), error=exc, attempts=0, origin=origin)
        from_retry = topic == self.retry_topic
        mark = read_mark(raw_headers) if from_retry else None
        if mark is not None:
            origin = mark.origin or origin
        origin_topic, _, rest = origin.partition("/")
        origin_offset = int(rest.rsplit("/", 1)[-1] or 0)
        if from_retry:
            context = self.store.context(headers.workflow_id)
        else:
            position = (topic, partition, offset)
            context, first_seen = self.store.fold(
                workflow_id=headers.workflow_id,
                event_id=headers.id,
                event_type=headers.type,
                source=headers.source,
                payload=message.value(),
                position=position,
            )
            if first_seen != position:
                return _Outcome("duplicate")  # first seen at an earlier offset
        if not self.agent.wants(headers.type):
            return _Outcome("ignored")  # decided from the headers: never decoded
        context = context.snapshot()  # as of this event, not of the batch's end
        try:
            decoded = self.codec.decode(message.value())
        except SchemaError as exc:
            return self._dead_record(message, reason=str(exc), error=exc, attempts=0, origin=origin)
        context.decoder = self._payload_of
        spec = self.agent.handler_for(headers.type, decoded.payload)
        if spec is None:
            return _Outcome("ignored")
        try:
            event = spec.event_class.from_avro(decoded.payload)
        except Exception as exc:  # a payload that decodes but breaks the class's rules
            return self._dead_record(
                message,
                reason=f"payload fails {spec.event_class.__name__} validation: {exc}",
                error=exc,
                attempts=0,
                origin=origin,
                spec=spec,
                headers=headers,
            )
        if not from_retry:
            blockers = [
                o
                for i, o in self.store.parked(headers.workflow_id).items()
                if i != headers.id and o < origin_offset
            ]
            if blockers:
                return self._retry_record(
                    message,
                    attempt=0,
                    not_before_ms=0,
                    origin=origin,
                    error="parked behind an earlier event of its workflow",
                    kind="park",
                )
        return _Item(
            message=message,
            headers=headers,
            spec=spec,
            event=event,
            attempt=(mark.attempt if mark else 0) + 1,
            origin=origin,
            origin_topic=origin_topic,
            from_retry=from_retry,
            priority=int(Priority.parse(headers.priority)),
            context=context,
            cause_hash=content_hash(message.key(), message.value(), raw_headers),
        )

    def _shutdown_budget_spent(self) -> bool:
        started = self._stop_requested_at
        return started is not None and self.clock() - started >= self.settings.shutdown_timeout_s

    async def _run_items(self, items: list[_Item]) -> list[tuple[_Item, _Outcome]] | None:
        """Run handlers: workflows concurrently (priority first), each workflow in order."""
        limit = asyncio.Semaphore(self.settings.max_in_flight)
        results: list[tuple[_Item, _Outcome]] = []
        groups = schedule(items, key=lambda i: i.headers.workflow_id, priority=lambda i: i.priority)

        async def run_group(group: list[_Item]) -> None:
            blocked = False
            for item in group:
                if blocked:
                    results.append(
                        (
                            item,
                            self._retry_record(
                                item.message,
                                attempt=item.attempt - 1,
                                not_before_ms=0,
                                origin=item.origin,
                                error="parked behind an earlier event of its workflow",
                                kind="park",
                            ),
                        )
                    )
                    continue
                async with limit:
                    outcome = await self._handle(item)
                results.append((item, outcome))
                blocked = outcome.kind in ("retry", "defer", "park")

        tasks = [asyncio.ensure_future(run_group(g)) for g in groups]
        if not tasks:
            return results
        pending: set[asyncio.Future[None]] = set(tasks)
        while pending:
            # Wake up now and then: a SIGTERM gives the batch shutdown_timeout_s to
            # finish; past it, the batch is abandoned uncommitted and redelivered.
            _, pending = await asyncio.wait(pending, timeout=0.1)
            if pending and self._shutdown_budget_spent():
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending)
                return None
        for task in tasks:
            task.result()
        return results

    async def _handle(self, item: _Item) -> _Outcome:
        assert self.store is not None
        spec, headers = item.spec, item.headers
        ctx = HandlerContext(
            agent=self.agent.name,
            step=spec.step,
            headers=headers,
            attempt=item.attempt,
            workflow=item.context or self._context(headers.workflow_id),
            raw_headers=headers_of(item.message),
            delivery=f"{topic_of(item.message)}/{partition_of(item.message)}/"
            f"{offset_of(item.message)}",
            store=self.store,
            flow=self.flow,
        )
        timeout = spec.timeout_s or self.settings.step_timeout_s
        started = self.clock()
        attributes = {
            "messaging.system": "kafka",
            "messaging.destination.name": item.origin_topic,
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
                        result = await spec.call(item.event, ctx)
                except TimeoutError as exc:
                    raise StepTimeout(
                        f"step '{spec.step}' ran past its {timeout:g}s timeout and was cancelled"
                    ) from exc
                outputs = spec.outputs(item.event, _as_list(result))
                traceparent = current_traceparent() or headers.traceparent
                records = [
                    self._output(item.headers, item.origin_topic, e, traceparent, item.cause_hash)
                    for e in [*ctx.recorded, *outputs]
                ]
                outcome = _Outcome("ok", records=records)
            except DependencyUnavailable as exc:
                delay_ms = max(0, int((exc.retry_at - self.clock()) * 1000))
                # Recorded effects of this attempt must still reach the log.
                traceparent = current_traceparent() or headers.traceparent
                outcome = self._retry_record(
                    item.message,
                    attempt=item.attempt - 1,
                    not_before_ms=self.wall_ms() + delay_ms,
                    origin=item.origin,
                    error=str(exc),
                    kind="defer",
                    extra=[
                        self._output(
                            item.headers, item.origin_topic, e, traceparent, item.cause_hash
                        )
                        for e in ctx.recorded
                    ],
                )
            except Exception as exc:
                outcome = self._failure(item, exc, ctx)
        outcome.duration_ms = (self.clock() - started) * 1000
        outcome.step, outcome.attempt = spec.step, item.attempt
        return outcome

    def _failure(self, item: _Item, error: Exception, ctx: HandlerContext) -> _Outcome:
        """A failed attempt: retry with backoff, or dead-letter and fail the step."""
        retryable = is_retryable(error)
        traceparent = current_traceparent() or item.headers.traceparent
        recorded = [
            self._output(item.headers, item.origin_topic, e, traceparent, item.cause_hash)
            for e in ctx.recorded
        ]
        if retryable and not self.policy.exhausted(item.attempt):
            delay = self.policy.delay(item.attempt)
            return self._retry_record(
                item.message,
                attempt=item.attempt,
                origin=item.origin,
                not_before_ms=self.wall_ms() + int(delay * 1000),
                error=f"{error.__class__.__name__}: {error}",
                kind="retry",
                extra=recorded,
            )
        reason = (
            f"step '{item.spec.step}' failed after {item.attempt} attempt(s): "
            f"{error.__class__.__name__}: {error}"
        )
        outcome = self._dead_record(
            item.message,
            reason=reason,
            error=error,
            attempts=item.attempt,
            origin=item.origin,
            spec=item.spec,
            headers=item.headers,
            retryable=retryable,
        )
        outcome.records[:0] = recorded
        return outcome

    def _payload_of(self, raw: bytes) -> dict[str, Any]:
        return self.codec.decode(raw).payload

    def _context(self, workflow_id: str) -> WorkflowContext:
        assert self.store is not None
        context = self.store.context(workflow_id)
        context.decoder = self._payload_of
        return context

    # -- records produced in the transaction -----------------------------------------------

    def _output(
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
        topic = self.agent.output_topic or origin_topic
        value = self.codec.encode(topic, event.event_type, event.to_avro())
        key = cause.workflow_id.encode()
        return (topic, key, value, signed(key, value, headers.to_kafka()))

    def _retry_record(
        self,
        message: Message,
        *,
        attempt: int,
        not_before_ms: int,
        origin: str,
        error: str,
        kind: str,
        extra: list[OutRecord] | None = None,
    ) -> _Outcome:
        headers = retry_headers(
            headers_of(message),
            attempt=attempt,
            not_before_ms=not_before_ms,
            origin=origin,
            error=error,
        )
        record: OutRecord = (self.retry_topic, message.key(), message.value(), headers)
        return _Outcome(kind, records=[*(extra or []), record], error=error)

    def _dead_record(
        self,
        message: Message,
        *,
        reason: str,
        error: BaseException,
        attempts: int,
        origin: str,
        spec: HandlerSpec | None = None,
        headers: EventHeaders | None = None,
        retryable: bool = False,
    ) -> _Outcome:
        dlq_headers = dead_letter_headers(
            headers_of(message),
            agent=self.agent.name,
            reason=reason,
            error_class=f"{type(error).__module__}.{type(error).__qualname__}",
            stack="".join(traceback.format_exception(error)),
            attempts=attempts,
            origin=origin,
            now_ms=self.wall_ms(),
        )
        records: list[OutRecord] = [
            (self.settings.deadletter_topic, message.key(), message.value(), dlq_headers)
        ]
        if spec is not None and headers is not None:
            topic = origin.split("/", 1)[0]
            failed = StepFailed(
                step=spec.step,
                reason=reason[:2000],
                error_class=type(error).__qualname__,
                attempts=attempts,
                retryable=retryable,
            )
            try:
                cause_hash = content_hash(message.key(), message.value(), headers_of(message))
                records.append(
                    self._output(headers, topic, failed, headers.traceparent, cause_hash)
                )
            except SagalogError as exc:
                self.telemetry.log(
                    "dead_letter",
                    f"could not publish StepFailed: {exc}",
                    level=logging.ERROR,
                    workflow_id=headers.workflow_id,
                )
        return _Outcome("dead", records=records, error=reason)

    # -- the transaction --------------------------------------------------------------------

    def _commit(self, outcomes: list[_Outcome]) -> bool:
        """Produce every outcome's records and commit the offsets in one transaction.

        Returns:
            False when the transaction aborted (the consumer is rewound and the batch
            runs again).
        """
        assert self._producer is not None and self._consumer is not None
        producer, consumer = self._producer, self._consumer
        self._txn_started = float("inf")  # a begin that fails is no old transaction
        denied: list[tuple[str, KafkaError]] = []  # topics the principal may not write

        def delivered(error: KafkaError | None, message: Message) -> None:
            if is_authorization_failure(error):
                denied.append((str(message.topic()), error))  # type: ignore[arg-type]

        try:
            producer.begin_transaction()
            self._txn_started = self.clock()
            for outcome in outcomes:
                for topic, key, value, headers in outcome.records:
                    producer.produce(
                        topic, key=key, value=value, headers=headers, on_delivery=delivered
                    )
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            # A fenced consumer's group metadata makes this call hang past its timeout.
            self._raise_if_consumer_failed()
            metadata, timeout_s = (
                consumer.consumer_group_metadata(),
                self.settings.connect_timeout_s * 3,
            )
            self._bounded(
                lambda: producer.send_offsets_to_transaction(positions, metadata, timeout_s),
                timeout_s=timeout_s + 30,
                what="send_offsets_to_transaction",
            )
            producer.commit_transaction(self.settings.transaction_timeout_s)
        except KafkaException as exc:
            self._raise_if_denied(exc, denied)
            self._on_transaction_error(exc)
            return False
        self.stats.transactions += 1
        self._uncommitted_since = None  # every assigned partition's position went with it
        if self.health.problems:
            self._answered()
        return True

    def _resolve_hanging_offsets(self) -> None:
        """End a transactional offset commit left hanging on the group, with a transaction
        of our own over the group's offsets that is aborted at once.

        A read_committed consumer reads committed offsets only once no transaction
        holds offsets of the group pending, and retries until its timeout while one
        does (UNSTABLE_OFFSET_COMMIT). One can hang for good: a producer abandoned in a
        rebuild (its call hung, its consumer fenced) whose TxnOffsetCommit reached the
        group after the new producer's init_transactions had aborted its transaction,
        so no marker ever ends it (seen after two broker kills: an agent's every
        assignment timed out for minutes, and a consumer of its group outside the
        agent timed out alike). The coordinator ends a producer id's pending offsets on
        any marker of that producer id, so this abort, ours with a newer epoch, ends
        them: checked by hand on that broker, the offsets read at once afterwards.
        """
        assert self._producer is not None and self._consumer is not None
        producer, consumer = self._producer, self._consumer
        first = self.agent.topics[0]
        timeout_s = self.settings.connect_timeout_s
        try:
            producer.begin_transaction()
            self._bounded(
                lambda: producer.send_offsets_to_transaction(
                    [TopicPartition(first, 0, 0)],  # any offset: the abort discards it
                    consumer.consumer_group_metadata(),
                    timeout_s,
                ),
                timeout_s=timeout_s + 10,
                what="send_offsets_to_transaction (resolving hanging offsets)",
            )
            producer.abort_transaction(timeout_s)
        except (KafkaException, ClientHung, ConsumerFailed) as exc:
            self.telemetry.log(
                "recover",
                f"could not end a hanging offset commit of the group: {exc}",
                level=logging.WARNING,
                outcome="error",
            )
            return
        self.telemetry.log(
            "recover",
            "the group's committed offsets did not answer (a transactional offset commit "
            "pending); ended it with an aborted transaction of this transactional id",
            level=logging.WARNING,
            outcome="resolved",
        )

    def _commit_waiting_offsets(self) -> None:
        """Commit the offsets of skipped records once they have waited ``offsets_commit_s``.

        Until then a restart or a rebalance reads those records again, which costs a
        skip each and changes nothing: they were neither handled nor produced from.
        """
        since = self._uncommitted_since
        if since is not None and self.clock() - since >= self.settings.offsets_commit_s:
            self._commit([])

    def _bounded(self, call: Callable[[], None], *, timeout_s: float, what: str) -> None:
        """Run a librdkafka call that may block past its own timeout; abandon it if it does.

        librdkafka's ``send_offsets_to_transaction`` ignores its timeout when the group
        coordinator goes away mid-call (confluentinc/librdkafka#5456, #5511), and it
        hangs as well when the consumer whose group metadata it carries is fenced
        meanwhile (seen on one broker: the fencing arrived during the call, which never
        returned). A C call cannot be interrupted, and whether a replacement producer
        with the same transactional.id would release it does not matter: the call is
        left to its thread, and the clients are built anew (``ClientHung`` or
        ``ConsumerFailed`` to the run loop). The new producer's init_transactions bumps
        the epoch, so the abandoned producer can never commit, and aborts its open
        transaction on the broker; the new consumer resumes from the committed offsets.
        Until 2026-12 this exited the process (70) instead.
        """
        future = self._helper.submit(call)  # one long-lived thread: a new one per call cost
        deadline = self.clock() + timeout_s  # more than the call itself at a txn per batch
        while True:
            try:
                future.result(min(0.5, max(0.0, deadline - self.clock())))
                return  # the call's own error is raised by result()
            except TimeoutError:
                if future.done():
                    raise  # the call itself raised it
            if self._consumer_fatal is None and self.clock() < deadline:
                continue
            # Abandoned: its thread may never come back, so later calls get a new one.
            self._helper.shutdown(wait=False)
            self._helper = ThreadPoolExecutor(
                1, thread_name_prefix=f"sagalog-{self.agent.name}-bounded"
            )
            if self._consumer_fatal is not None:
                self._raise_if_consumer_failed()
            self.telemetry.log(
                "transaction",
                f"{what} still blocked after {timeout_s:g}s (librdkafka ignores its timeout when "
                "the coordinator went away); abandoning it and building new clients",
                level=logging.ERROR,
                outcome="hung",
            )
            raise ClientHung(
                f"agent '{self.agent.name}' instance '{self.settings.instance_id}': {what} "
                f"blocked past {timeout_s:g}s"
            )

    def _raise_if_denied(self, exc: KafkaException, denied: list[tuple[str, KafkaError]]) -> None:
        """Abort and stop on a missing right: retrying the batch would fail the same way.

        A refused write shows up as the commit's "message(s) failed delivery" with
        TOPIC_AUTHORIZATION_FAILED in the record's delivery report; a refused group
        or transactional id as the transaction's own error.
        """
        error: KafkaError = exc.args[0]
        if not denied and not is_authorization_failure(error):
            return
        assert self._producer is not None
        with contextlib.suppress(KafkaException):
            self._producer.abort_transaction(self.settings.connect_timeout_s)
        self.stats.aborted += 1
        if denied:
            topic, error = denied[0]
            failure = authorization_error(self.settings, error, operation="WRITE", resource=topic)
        elif error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            failure = authorization_error(
                self.settings, error, operation="READ", resource=self.group_id
            )
        else:  # the transactional id, or a topic the delivery reports did not name
            resource = self.transactional_id
            if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                resource = "(one written in this transaction)"
            failure = authorization_error(
                self.settings, error, operation="WRITE", resource=resource
            )
        self.telemetry.log(
            "transaction", f"transaction aborted: {failure}", level=logging.ERROR, outcome="denied"
        )
        raise failure from exc

    def _on_transaction_error(self, exc: KafkaException) -> None:
        assert self._producer is not None
        error: KafkaError = exc.args[0]
        self.stats.aborted += 1
        self.telemetry.log(
            "transaction",
            f"transaction failed: {error.str()}",
            level=logging.WARNING,
            outcome="aborted",
        )
        open_s = self.clock() - self._txn_started
        if error.code() in _FENCED and open_s >= self.settings.transaction_timeout_s:
            # Not a newer instance: the coordinator aborted this transaction because it
            # outlived transaction.timeout.ms (a broker outage in its middle) and bumped
            # the epoch, which librdkafka reports as fenced (seen: budget_agent, 15 s
            # timeout, exit 70 after a broker restart). A genuine takeover fences a
            # young transaction; this one is cured by new clients.
            raise TransactionTimedOut(
                f"the transaction was open {open_s:.0f}s, past transaction.timeout.ms "
                f"({self.settings.transaction_timeout_s:g}s), and the coordinator aborted it "
                f"({error.str()})"
            ) from exc
        if error.code() in _FENCED:
            raise ZombieFenced(
                f"instance '{self.settings.instance_id}' of agent '{self.agent.name}' was fenced: "
                "another instance with the same instance id took over; this one stops. Give "
                "every live instance its own SAGALOG_AGENT_INSTANCE_ID"
            ) from exc
        if error.fatal():
            with contextlib.suppress(KafkaException):
                self._producer.abort_transaction(self.settings.connect_timeout_s)
            self._producer = self._new_producer()
        else:
            # An abort that times out stays "in progress" in librdkafka, and every later
            # transactional call is refused as conflicting with it ("Conflicting
            # abort_transaction API call is already in progress", every 10 s for good
            # after a broker SIGSTOP): the error goes to the run loop, which builds new
            # clients, whose init_transactions aborts the transaction on the broker.
            self._producer.abort_transaction(self.settings.connect_timeout_s)
        self._rewind()

    def _rewind(self) -> None:
        """Seek every assigned partition back to its committed offset."""
        assert self._consumer is not None
        assignment = self._consumer.assignment()
        if not assignment:
            return
        for tp in self._consumer.committed(assignment, timeout=self.settings.connect_timeout_s):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            with contextlib.suppress(KafkaException):
                self._consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    def _before_commit(self, item: _Item, outcome: _Outcome) -> None:
        """Park a workflow whose event goes to the retry topic, before the commit: an
        aborted transaction leaves a parking entry at an offset that is replayed, which
        the offset rule ignores."""
        assert self.store is not None
        if outcome.kind in ("retry", "defer", "park"):
            offset = int(item.origin.rsplit("/", 1)[-1])
            self.store.park(item.headers.workflow_id, item.headers.id, offset)

    def _after_commit(
        self, records: list[Message], items: list[_Item], handled: list[tuple[_Item, _Outcome]]
    ) -> None:
        assert self.store is not None
        last: dict[tuple[str, int], int] = {}
        retry_topic = self.retry_topic
        for message in records:
            topic = topic_of(message)
            if topic != retry_topic:
                key = (topic, partition_of(message))
                offset = offset_of(message)
                if offset > last.get(key, -1):
                    last[key] = offset
        for (topic, partition), offset in last.items():
            self.store.set_checkpoint(topic, partition, offset + 1)
        for item, outcome in handled:
            if item.from_retry and outcome.kind in ("ok", "dead"):
                self.store.unpark(item.headers.workflow_id, item.headers.id)

    def _account(self, message: Message, outcome: _Outcome) -> None:
        stats = self.stats
        if outcome.kind == "ok":  # the hot path: counters only, a log line if asked for
            stats.handled += 1
            self.telemetry.count("handled", "ok")
            self.telemetry.latency.record(outcome.duration_ms, self.telemetry.attributes)
            if not self.telemetry.logger.isEnabledFor(logging.INFO):
                return
        elif outcome.kind == "ignored":
            stats.ignored += 1
            return
        headers = {
            k: (v.decode() if isinstance(v, bytes) else v)
            for k, v in (headers_of(message))
            if k.startswith("ce_")
        }
        fields: dict[str, Any] = {
            "workflow_id": headers.get("ce_workflowid"),
            "event_type": headers.get("ce_type"),
            "event_id": headers.get("ce_id"),
            "outcome": outcome.kind,
            "duration_ms": round(outcome.duration_ms, 2),
            "step": outcome.step,
            "attempt": outcome.attempt,
        }
        stats = self.stats
        match outcome.kind:
            case "ok":
                self.telemetry.log("handled", "handled", **fields)
            case "retry":
                stats.failed += 1
                stats.retried += 1
                self.telemetry.count("failed", "retry")
                self.telemetry.count("retried")
                self.telemetry.log("retry", outcome.error, level=logging.WARNING, **fields)
            case "defer":
                stats.deferred += 1
                self.telemetry.log("defer", outcome.error, **fields)
            case "park":
                stats.parked += 1
                self.telemetry.log("park", outcome.error, **fields)
            case "dead":
                stats.failed += 1
                stats.dead_lettered += 1
                self.telemetry.count("failed", "dead")
                self.telemetry.count("dead_lettered")
                self.telemetry.log("dead_letter", outcome.error, level=logging.ERROR, **fields)
            case "duplicate":
                stats.duplicates += 1
                self.telemetry.log("duplicate", "discarded a duplicate event id", **fields)
            case _:
                pass

    def _breaker_changed(self, dependency: str, before: BreakerState, after: BreakerState) -> None:
        self.telemetry.log(
            "breaker",
            f"circuit breaker of '{dependency}' {before} -> {after}",
            transition=f"{before}->{after}",
            outcome=str(after),
        )


def _as_list(result: Any) -> list[Event]:
    if result is None:
        return []
    if isinstance(result, Event):
        return [result]
    return list(result)
