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

A worker hosts one agent or several (``lane``): co-hosted agents share the consumer,
the producer and each batch's transaction, and each runs steps 2 and 3 on its own
records with its own handlers, settings and state.

This module is the shell that wires those together and runs the loop; the
decisions are in ``triage``, each agent's part in ``lane``, the clients and their
recovery in ``connection``, the partitions in ``assignment``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from sagalog import open_transactions
from sagalog.agents import exported_metrics, probes
from sagalog.agents.assignment import Assignment
from sagalog.agents.binding import BoundAgent, bind, project_flows
from sagalog.agents.claims import ClaimsLog
from sagalog.agents.connection import KafkaClients
from sagalog.agents.declaration import Agent
from sagalog.agents.exceptions import ClientHung, ConsumerFailed, TransactionTimedOut
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.handling import Work
from sagalog.agents.internal_topics import ensure_internal_topics
from sagalog.agents.lane import Lane
from sagalog.agents.outputs import Result
from sagalog.agents.records import Delivered
from sagalog.agents.settings import AgentSettings
from sagalog.agents.state_store import StateStore
from sagalog.agents.streaming import StreamWriter
from sagalog.agents.telemetry import AgentTelemetry, configure_logging
from sagalog.agents.transaction import Transactions
from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import ConfigurationError, ServiceUnavailableError
from sagalog.flows.model import Flow
from sagalog.health import Health, HealthBook, Verdict
from sagalog.health_server import HealthServer, serve_health
from sagalog.personal.cipher import personal_data
from sagalog.tracing import configure_tracing

Member = tuple[Agent, AgentSettings]
"""A co-hosted agent and its own settings."""

COHOSTED_BATCH_INTERVAL_S = 0.02
"""A co-host's ``batch_interval_s`` unless one is set (alone: 50 ms). Its transaction
carries every agent's records, so it affords more of them; and a hand-off between
two of its agents waits out one interval, since the record comes from its own last
batch: the interval is the hand-off's latency, bought with a little agent CPU per saga
(docs/design/tuning-measurements.md)."""


class AgentWorker:
    """Runs one instance of an agent, or of several co-hosted agents, until stopped.

    Args:
        agents: the agent (run with ``settings``), or the co-hosted agents, each
            with its own settings.
        settings: the process's: the cluster, the instance id, the data folder, the
            batching and the transaction (and, alone, the agent's own).
        flows: the flows the agents are bound to (``agents.binding``); by default
            the project's (``settings.project_dir``).
    """

    def __init__(
        self,
        agents: Agent | Sequence[Member],
        settings: AgentSettings,
        *,
        catalog: SchemaCatalog | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        flows: Iterable[Flow] | None = None,
    ) -> None:
        members: list[Member] = [(agents, settings)] if isinstance(agents, Agent) else [*agents]
        if not members:
            raise ConfigurationError("a worker needs at least one agent to run")
        names = [agent.name for agent, _ in members]
        if len(set(names)) < len(names):
            raise ConfigurationError(f"an agent is named twice among {names}: names must differ")
        if len(members) > 1 and "batch_interval_s" not in settings.model_fields_set:
            settings = settings.model_copy(update={"batch_interval_s": COHOSTED_BATCH_INTERVAL_S})
        self.settings = settings
        self.catalog = catalog or SchemaCatalog.load(Path(settings.project_dir) / "schemas")
        every = list(
            project_flows(Path(settings.project_dir), self.catalog) if flows is None else flows
        )
        bound = [(bind(agent, every), own) for agent, own in members]
        for agent, _ in bound:
            agent.check(self.catalog)
        self.codec = EventCodec(
            catalog=self.catalog,
            registry=SchemaRegistry(settings),
            personal=personal_data(settings),
        )
        self.clock = clock
        self.wall_ms = wall_ms
        self.lanes = [
            Lane(
                agent,
                own,
                codec=self.codec,
                instance=settings.instance_id,
                clock=clock,
                wall_ms=wall_ms,
                give_up=self._shutdown_budget_spent,
            )
            for agent, own in bound
        ]
        self.name = group_name(names)
        self.group_id = settings.group_id or f"sagalog-agent-{self.name}"
        self.transactional_id = f"sagalog-agent-{self.name}-{settings.instance_id}"
        # Alone, the process's counts are its agent's (one log line, one set of series).
        self.telemetry = (
            self.lanes[0].telemetry
            if len(self.lanes) == 1
            else AgentTelemetry(agent=self.name, instance=settings.instance_id)
        )
        self.stats = self.telemetry.stats
        self.health = HealthBook(clock=clock, on_change=self._health_changed)
        self.clients = KafkaClients(
            agent=self.name,
            topics=sorted({topic for lane in self.lanes for topic in lane.topics}),
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
            first_topic=self.lanes[0].agent.topics[0],
            telemetry=self.telemetry,
            clock=clock,
        )
        self.partitions = 1  # of each input topic; known once the topics are checked
        self._stopping = False
        self._stop_requested_at: float | None = None
        self._uncommitted_since: float | None = None  # skipped records' offsets wait since
        self.inputs = frozenset(topic for lane in self.lanes for topic in lane.agent.topics)
        """The workflow topics read (the retry topic is not one)."""
        self._held_open: dict[tuple[str, int], open_transactions.HeldOpen] = {}
        self._stats_judged = 0
        self._batch_started = float("-inf")
        self._loop = asyncio.new_event_loop()
        self.last_progress = clock()
        """When the run loop last went round (``probes.live``)."""
        self.health_server: HealthServer | None = None
        self.claims: ClaimsLog | None = None
        self.streams: StreamWriter | None = None
        """Publishes model streams (built with ``claims``)."""
        """Writes the model calls' claims (built at ``run`` when a lane has budgets)."""

    # Alone, the worker's agent, flow control and store are its lane's.

    @property
    def agent(self) -> BoundAgent:
        return self.lanes[0].agent

    @property
    def flow(self) -> FlowControl:
        return self.lanes[0].flow

    @property
    def store(self) -> StateStore | None:
        """The (first) agent's local state; attaching one builds what reads it."""
        return self.lanes[0].store

    @store.setter
    def store(self, store: StateStore) -> None:
        self.lanes[0].store = store
        if len(self.lanes) == 1:
            self._assign()

    def _open_stores(self) -> None:
        for lane in self.lanes:
            lane.open_store(self.settings.data_dir, self.settings.instance_id).health = self.health
        self._assign()

    def _assign(self) -> None:
        self.assignment = Assignment(
            clients=self.clients,
            lanes=self.lanes,
            partitions=self.partitions,
            telemetry=self.telemetry,
            wall_ms=self.wall_ms,
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
        configure_tracing(self.name)
        if install_signals:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        for lane in self.lanes:
            self.partitions = ensure_internal_topics(
                self.settings,
                inputs=lane.agent.topics,
                retry_topic=lane.retry_topic,
                deadletter_topic=lane.settings.deadletter_topic,
                claims_topic=lane.claims_topic,
            )
        self._open_stores()
        if any(lane.claims_topic is not None for lane in self.lanes):
            self.claims = ClaimsLog(self.settings)
            self.streams = StreamWriter(self.settings)
            for lane in self.lanes:
                lane.claims = self.claims
                lane.streams = self.streams
        self.health_server = serve_health(self.settings, live=self._live, ready=self._ready)
        unexport = exported_metrics.export(
            lanes=[
                (lane.name, lane.telemetry.stats, lane.flow, lane.budgets) for lane in self.lanes
            ],
            host=self.name,
            stats=self.stats,
            clients=self.clients,
            wall_ms=self.wall_ms,
        )
        self.clients.connect()
        served = "" if self.health_server is None else f"; health on :{self.health_server.port}"
        self.telemetry.log("start", f"agent {self.name} started{served}", outcome="ok")
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
        if self.claims is not None:
            self.claims.close()
        if self.streams is not None:
            self.streams.close()
        if self.codec.personal is not None:
            self.codec.personal.close()
        for lane in self.lanes:
            if lane.store is not None:
                lane.store.close()
        if self.health_server is not None:
            self.health_server.stop()
        took = 0.0 if started is None else (self.clock() - started) * 1000
        telemetries = {id(t): t for t in [self.telemetry, *(lane.telemetry for lane in self.lanes)]}
        for telemetry in telemetries.values():
            counts = ", ".join(f"{name} {value}" for name, value in vars(telemetry.stats).items())
            telemetry.log(
                "stop",
                f"agent {telemetry.agent} stopped; {counts}",
                duration_ms=round(took, 1),
                outcome="ok",
            )

    # -- one batch ------------------------------------------------------------------------

    def _iteration(self) -> None:
        self.assignment.resume_due()
        messages = self._poll()
        failed = self.clients.assign_failed
        if failed is not None:
            if failed.args and failed.args[0].code() == KafkaError._TIMED_OUT:
                self.transactions.resolve_hanging_offsets()
            raise failed
        # An assignment happens inside the poll, and the poll goes on to return records
        # of the partitions that were not paused with it (a retry partition, say) whose
        # context the paused ones hold: handled before the rebuild, a retry finds no
        # context and is dead-lettered (docs/design/incident-history.md). The
        # projection is whole before anything is handled.
        self.assignment.hydrate_pending()
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
        self._close_held_open()
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
        try:
            self._process_batch(messages)
        finally:
            # The batch's projection changes (and, committed, its checkpoint) in one
            # write. Folding is right whatever became of the transaction: the inputs
            # are committed records, and a replay folds nothing twice.
            for lane in self.lanes:
                if lane.store is not None:
                    lane.store.flush()

    def _process_batch(self, messages: list[Message]) -> None:
        records = [Delivered.of(m) for m in self.assignment.hold_until_due(messages)]
        alone = len(self.lanes) == 1
        taken = []
        for lane in self.lanes:
            mine = records if alone else [r for r in records if r.position.topic in lane.topics]
            items, results = lane.take(mine)
            taken.append((lane, mine, items, results))
        runs = [lane.runner.run(items) for lane, _, items, _ in taken if items]
        ran: list[Ran] = self._loop.run_until_complete(_together(runs)) if runs else []
        if self._stopping and any(handled is None for handled in ran):
            return  # shutdown budget spent: nothing committed, the batch is redelivered
        done = iter(ran)
        batch: list[tuple[Lane, list[Delivered], list[tuple[Work, Result]], list[Any]]] = []
        for lane, mine, items, results in taken:
            outcome: Ran = next(done) if items else []
            handled = outcome or []
            lane.park(handled)
            results.extend((item.message, result) for item, result in handled)
            batch.append((lane, mine, handled, results))
        produced = [r for *_, results in batch for _, r in results]
        if not any(items for _, _, items, _ in taken) and not any(r.records for r in produced):
            # Nothing to produce (the usual batch of an agent that handles one type in
            # six): a transaction would only move offsets, at four round trips and a
            # marker per partition on the broker. Its offsets ride with the next.
            if self._uncommitted_since is None:
                self._uncommitted_since = self.clock()
        elif not self._commit(produced):
            return
        for lane, mine, handled, results in batch:
            lane.committed(mine, handled, results)

    # -- the transaction --------------------------------------------------------------------

    def _commit(self, results: list[Result], *, closers: Sequence[tuple[str, int]] = ()) -> bool:
        if not self.transactions.commit(results, closers=closers):
            return False
        self._uncommitted_since = None  # every assigned partition's position went with it
        return True

    def _close_held_open(self) -> None:
        """At each consumer statistics (5 s): close an input partition a transaction held
        open at one offset for ``open_transaction_after_s``, in a transaction of this
        instance's id, which ends the range if this id left it (a commit marker lost in
        a broker failure), and report one still held after that
        (``sagalog.open_transactions``). The retry topic is watched too: the agent writes
        its retries there, so a marker lost there holds its retries. A partition paused
        (a retry not due yet, a rebuild) is not fetched, so its figures are stale and it
        waits to be judged until it is read again."""
        clients = self.clients
        if clients.stats_seen == self._stats_judged:
            return
        self._stats_judged = clients.stats_seen
        assignment = self.assignment
        watched = self.inputs | assignment.retry_topics
        spans = {key: span for key, span in clients.held_open.items() if key[0] in watched}
        verdict = open_transactions.judge(
            self._held_open,
            spans,
            now=self.clock(),
            after_s=self.settings.open_transaction_after_s,
            paused=assignment.paused_until.keys() | assignment.to_hydrate.keys(),
        )
        self._held_open = verdict.held
        if verdict.close:
            where = ", ".join(f"{t}/{p} at {spans[(t, p)][0]}" for t, p in verdict.close)
            self.telemetry.log(
                "close_transaction",
                f"input held open ({where}): closing the transaction with a record of "
                f"{self.transactional_id} (a marker lost in a broker failure leaves it so)",
                level=logging.WARNING,
            )
            if self._commit([], closers=verdict.close):
                self.stats.closers += len(verdict.close)
        reader = f"agent {self.name}"
        for problem in open_transactions.mark_health(self.health, verdict, spans, reader=reader):
            self.telemetry.log("open_transaction", problem, level=logging.ERROR, outcome="error")

    def _commit_waiting_offsets(self) -> None:
        """Commit the offsets of skipped records once they have waited ``offsets_commit_s``.

        Until then a restart or a rebalance reads those records again, which costs a
        skip each and changes nothing: they were neither handled nor produced from.
        """
        since = self._uncommitted_since
        if since is not None and self.clock() - since >= self.settings.offsets_commit_s:
            self._commit([])


Ran = list[tuple[Work, Result]] | None
"""A lane's handler results for a batch, or None: the shutdown budget ran out first."""


def group_name(names: Sequence[str]) -> str:
    """What a worker of these agents is called: its group and transactional ids and
    its log lines. Alone, the agent's name (as it always was); co-hosted, the names
    sorted and joined by ``+``, so the same set gives the same group in any order."""
    return names[0] if len(names) == 1 else "+".join(sorted(names))


async def _together(runs: list[Coroutine[Any, Any, Ran]]) -> list[Ran]:
    """The lanes' handler runs of one batch, side by side (each bounded by its own
    ``max_in_flight``)."""
    return list(await asyncio.gather(*runs))
