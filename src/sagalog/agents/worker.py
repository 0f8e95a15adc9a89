"""The agent worker: consume, handle, produce and commit in one Kafka transaction.

One iteration is one batch and one transaction:

1. poll up to ``max_batch`` committed records (inputs and the agent's retry topic);
2. triage each (``triage``): fold every input event into the local projection, drop
   true duplicates (an event id first seen at an earlier offset), hold retries not
   yet due, and pick the records this agent handles;
3. run the handlers (``handling``), grouped by workflow: a workflow's events one
   after another, in order; different workflows concurrently, up to
   ``max_in_flight``, highest priority lane first;
4. in one transaction (``transaction``), produce the outputs, the retries, the dead
   letters and the ``StepFailed`` events (``outputs``), and commit the consumed
   offsets; then checkpoint the projection (``accounting``).

This module is the shell that wires those together and runs the loop; the
decisions are in ``triage``, the clients and their recovery in ``connection``, the
partitions in ``assignment``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from confluent_kafka import KafkaError, KafkaException, Message

from sagalog.agents import exported_metrics, probes
from sagalog.agents.accounting import account, after_commit, park_before_commit
from sagalog.agents.assignment import Assignment
from sagalog.agents.circuit_breaker import BreakerPolicy, BreakerState
from sagalog.agents.connection import KafkaClients
from sagalog.agents.declaration import Agent
from sagalog.agents.exceptions import ClientHung, ConsumerFailed, TransactionTimedOut
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.handling import HandlerRunner, Work
from sagalog.agents.intake import Intake
from sagalog.agents.internal_topics import ensure_internal_topics
from sagalog.agents.outputs import RecordBuilder, Result
from sagalog.agents.settings import AgentSettings
from sagalog.agents.state_store import StateStore
from sagalog.agents.telemetry import AgentTelemetry, configure_logging
from sagalog.agents.transaction import Transactions
from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.backoff import RetryPolicy
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import ServiceUnavailableError
from sagalog.health import Health, HealthBook, Verdict
from sagalog.health_server import HealthServer, serve_health
from sagalog.position import RecordPosition
from sagalog.topic_names import retry_topic_for
from sagalog.tracing import configure_tracing


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
                outage_doubt_s=settings.breaker_outage_doubt_s,
            ),
            rate_limits=settings.rate_limits,
            max_rate_wait_s=settings.max_rate_wait_s,
            clock=clock,
        )
        self.telemetry = AgentTelemetry(agent=agent.name, instance=settings.instance_id)
        self.flow.on_breaker_change = self._breaker_changed
        self.stats = self.telemetry.stats
        self.health = HealthBook(clock=clock, on_change=self._health_changed)
        self.clients = KafkaClients(
            agent=agent.name,
            topics=[*agent.topics, self.retry_topic],
            settings=settings,
            group_id=self.group_id,
            transactional_id=self.transactional_id,
            telemetry=self.telemetry,
            health=self.health,
            clock=clock,
        )
        self.clients.on_drop = self._clients_dropped
        self.transactions = Transactions(
            clients=self.clients,
            first_topic=agent.topics[0],
            telemetry=self.telemetry,
            clock=clock,
        )
        self.builder = RecordBuilder(
            agent=agent.name,
            output_topic=agent.output_topic,
            retry_topic=self.retry_topic,
            deadletter_topic=settings.deadletter_topic,
            codec=self.codec,
            telemetry=self.telemetry,
            wall_ms=wall_ms,
        )
        self.partitions = 1  # of each input topic; known once the topics are checked
        self._store: StateStore | None = None
        self._stopping = False
        self._stop_requested_at: float | None = None
        self._uncommitted_since: float | None = None  # skipped records' offsets wait since
        self._batch_started = float("-inf")
        self._loop = asyncio.new_event_loop()
        self.last_progress = clock()
        """When the run loop last went round (``probes.live``)."""
        self.health_server: HealthServer | None = None

    @property
    def store(self) -> StateStore | None:
        """The instance's local state; attaching one builds what reads it."""
        return self._store

    @store.setter
    def store(self, store: StateStore) -> None:
        self._store = store
        self.assignment = Assignment(
            clients=self.clients,
            inputs=self.agent.topics,
            retry_topic=self.retry_topic,
            partitions=self.partitions,
            store=store,
            flow=self.flow,
            telemetry=self.telemetry,
            wall_ms=self.wall_ms,
        )
        self.intake = Intake(
            agent=self.agent,
            store=store,
            codec=self.codec,
            builder=self.builder,
            retry_topic=self.retry_topic,
        )
        self.runner = HandlerRunner(
            agent=self.agent.name,
            settings=self.settings,
            store=store,
            flow=self.flow,
            telemetry=self.telemetry,
            builder=self.builder,
            policy=self.policy,
            clock=self.clock,
            wall_ms=self.wall_ms,
            give_up=self._shutdown_budget_spent,
        )

    # -- lifecycle --------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the worker to finish its batch, commit and exit (SIGTERM does this)."""
        self._stopping = True

    def _live(self) -> Verdict:
        return probes.live(
            health=self.health,
            last_progress=self.last_progress,
            now=self.clock(),
            bound_s=self.settings.live_bound_s,
        )

    def _ready(self) -> Verdict:
        assignment = getattr(self, "assignment", None)  # built once the store is open
        return probes.ready(
            health=self.health,
            joined=assignment is not None and assignment.joined,
            hydrating=0 if assignment is None else len(assignment.to_hydrate),
            stopping=self._stopping,
        )

    def run(self, *, install_signals: bool = True) -> None:
        """Consume until stopped. Blocks.

        Raises:
            ZombieFenced: a newer instance with the same instance id took over.
        """
        configure_logging(json_lines=self.settings.log_json, level=self.settings.log_level)
        configure_tracing(self.agent.name)
        if install_signals:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        self.partitions = ensure_internal_topics(
            self.settings,
            inputs=self.agent.topics,
            retry_topic=self.retry_topic,
            deadletter_topic=self.settings.deadletter_topic,
        )
        self.store = StateStore(
            self.settings.data_dir / self.agent.name / self.settings.instance_id,
            folded_types=self.agent.folded_types(),
        )
        self.health_server = serve_health(self.settings, live=self._live, ready=self._ready)
        unexport = exported_metrics.export(
            agent=self.agent.name, stats=self.stats, flow=self.flow, clients=self.clients
        )
        self.clients.connect()
        served = "" if self.health_server is None else f"; health on :{self.health_server.port}"
        self.telemetry.log("start", f"agent {self.agent.name} started{served}", outcome="ok")
        started_stopping: float | None = None
        try:
            while not self._stopping:
                self.last_progress = self.clock()
                try:
                    self._iteration()
                except ConsumerFailed as exc:
                    self.clients.recover(exc, fenced=True)
                except (
                    KafkaException,
                    ServiceUnavailableError,
                    ClientHung,
                    TransactionTimedOut,
                ) as exc:
                    self.clients.recover(exc, fenced=False)
            started_stopping = self.clock()
        finally:
            unexport()
            self._shutdown(started_stopping)

    def _clients_dropped(self) -> None:
        self.assignment.forget()
        self._uncommitted_since = None  # the skipped records are read again: harmless

    def _health_changed(self, before: Health, after: Health, why: str) -> None:
        self.telemetry.log(
            "health",
            f"health {before} -> {after}: {why}",
            level=logging.WARNING if after is Health.DEGRADED else logging.INFO,
            transition=f"{before}->{after}",
            outcome=str(after),
        )

    def _breaker_changed(self, dependency: str, before: BreakerState, after: BreakerState) -> None:
        self.telemetry.log(
            "breaker",
            f"circuit breaker of '{dependency}' {before} -> {after}",
            transition=f"{before}->{after}",
            outcome=str(after),
        )

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping:  # a second signal: stop now, uncommitted work is redelivered
            raise KeyboardInterrupt
        self.telemetry.log("stop", f"received signal {signum}; finishing the batch")
        self._stopping = True
        self._stop_requested_at = self.clock()

    def _shutdown_budget_spent(self) -> bool:
        started = self._stop_requested_at
        return started is not None and self.clock() - started >= self.settings.shutdown_timeout_s

    def _shutdown(self, started: float | None) -> None:
        with contextlib.suppress(Exception):  # stopping: the offsets are read again, harmless
            if self._uncommitted_since is not None and self.clients.consumer is not None:
                self._commit([])  # the skipped records' offsets, so no one reads them again
        self.clients.close()
        if self.store is not None:
            self.store.close()
        if self.health_server is not None:
            self.health_server.stop()
        took = 0.0 if started is None else (self.clock() - started) * 1000
        counts = ", ".join(f"{name} {value}" for name, value in vars(self.stats).items())
        self.telemetry.log(
            "stop",
            f"agent {self.agent.name} stopped; {counts}",
            duration_ms=round(took, 1),
            outcome="ok",
        )

    # -- one batch ------------------------------------------------------------------------

    def _iteration(self) -> None:
        self.assignment.resume_due()
        self.assignment.hydrate_pending()
        messages = self._poll()
        failed = self.clients.assign_failed
        if failed is not None:
            if failed.args and failed.args[0].code() == KafkaError._TIMED_OUT:
                self.transactions.resolve_hanging_offsets()
            raise failed
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(message)
            elif error.code() != KafkaError._PARTITION_EOF:
                self.clients.raise_if_consumer_failed(error)
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
        self.clients.raise_if_consumer_failed()
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
        consumer = self.clients.consumer
        assert consumer is not None
        first = consumer.poll(self.settings.poll_timeout_s)
        if first is None:
            return []
        if self.settings.max_batch == 1:
            self._batch_started = self.clock()
            return [first]
        wait = self._batch_started + self.settings.batch_interval_s - self.clock()
        more = consumer.consume(self.settings.max_batch - 1, max(0.0, wait))
        self._batch_started = self.clock()
        return [first, *more]

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
        records = self.assignment.hold_until_due(messages)
        results: list[tuple[Message, Result]] = []
        items: list[Work] = []
        for message in records:
            work_or_result = self.intake.take(message)
            if isinstance(work_or_result, Work):
                items.append(work_or_result)
            else:
                results.append((message, work_or_result))
        handled = self._loop.run_until_complete(self.runner.run(items)) if items else []
        if self._stopping and handled is None:
            return  # shutdown budget spent: nothing committed, the batch is redelivered
        handled = handled or []
        park_before_commit(self.store, handled)
        results.extend((item.message, result) for item, result in handled)
        if not items and not any(r.records for _, r in results):
            # Nothing to produce (the usual batch of an agent that handles one type in
            # six): a transaction would only move offsets, at four round trips and a
            # marker per partition on the broker. Its offsets ride with the next.
            if self._uncommitted_since is None:
                self._uncommitted_since = self.clock()
        elif not self._commit([r for _, r in results]):
            return
        after_commit(
            self.store,
            (RecordPosition.of(m) for m in records),
            handled,
            retry_topic=self.retry_topic,
        )
        for message, result in results:
            account(self.telemetry, message, result)

    # -- the transaction --------------------------------------------------------------------

    def _commit(self, results: list[Result]) -> bool:
        if not self.transactions.commit(results):
            return False
        self._uncommitted_since = None  # every assigned partition's position went with it
        return True

    def _commit_waiting_offsets(self) -> None:
        """Commit the offsets of skipped records once they have waited ``offsets_commit_s``.

        Until then a restart or a rebalance reads those records again, which costs a
        skip each and changes nothing: they were neither handled nor produced from.
        """
        since = self._uncommitted_since
        if since is not None and self.clock() - since >= self.settings.offsets_commit_s:
            self._commit([])
