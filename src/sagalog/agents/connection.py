"""An agent instance's two Kafka clients: building them, riding out the broker's
absence, and building them anew when they cannot go on.

The producer is transactional (``transactional.id`` = agent and instance) and the
consumer a static member of the agent's group with the same id, read_committed. A
broker's loss and return is ridden out in-process: a fatal consumer (a static member
fenced by its own rejoin) or a client call that timed out outside the transaction
closes both clients and builds new ones, with backoff, for up to ``outage_limit_s``;
see ``recovery`` for why and what that keeps.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from sagalog.agents.exceptions import BROKER_AWAY, ClientHung, ConsumerFailed, is_fatal
from sagalog.agents.helper_thread import HelperThread
from sagalog.agents.recovery import FENCED_INSTANCE_ID, RejoinBudget
from sagalog.agents.settings import AgentSettings
from sagalog.agents.telemetry import AgentTelemetry
from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.backoff import RetryPolicy, retry_within
from sagalog.consumer_lag import STATS_INTERVAL_MS, Lag, Spans, consumer_lag, held_open
from sagalog.errors import SagalogError, ServiceUnavailableError
from sagalog.health import HealthBook

OUTAGE_BACKOFF = RetryPolicy(base_delay_s=0.5, max_delay_s=10.0)
Rebalance = Callable[[Consumer, list[TopicPartition]], None]


def fetch_pacing(settings: AgentSettings) -> dict[str, int]:
    """The consumer's fetch pacing for ``queued_fetch_pause_ms``.

    librdkafka keeps fetching while fewer than ``queued.min.messages`` records wait in
    the consumer's queue, and a read_committed fetch waiting on the broker is answered
    by every commit that makes records readable: with five agents and the load
    writing to one topic, a busy agent fetches several times per saga, most of them
    for a record or two (docs/agents.md, "Fetch pacing"). With ``queued.min.messages``
    1, a record the agent has not taken yet stops its fetching for
    ``fetch.queue.backoff.ms``, so what was committed meanwhile comes in one fetch. An
    idle agent's queue is empty, so its fetch still waits on the broker for the next
    record.
    """
    pause = settings.queued_fetch_pause_ms
    return {"queued.min.messages": 1, "fetch.queue.backoff.ms": pause} if pause else {}


class KafkaClients:
    """The producer and consumer of one agent instance, and their recovery."""

    def __init__(
        self,
        *,
        agent: str,
        topics: list[str],
        settings: AgentSettings,
        group_id: str,
        transactional_id: str,
        telemetry: AgentTelemetry,
        health: HealthBook,
        clock: Callable[[], float],
    ) -> None:
        """Args:
        topics: what the consumer subscribes to: the inputs and the retry topic.
        """
        self.agent = agent
        self.topics = topics
        self.settings = settings
        self.group_id = group_id
        self.transactional_id = transactional_id
        self.telemetry = telemetry
        self.health = health
        self.clock = clock
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.consumer_fatal: KafkaError | None = None  # set by librdkafka's error callback
        self.assign_failed: KafkaException | None = None  # set by the assignment callback
        self.rejoins = RejoinBudget(limit=settings.max_rejoins)
        self.on_assign: Rebalance = lambda consumer, partitions: None
        self.on_revoke: Rebalance = lambda consumer, partitions: None
        self.on_drop: Callable[[], None] = lambda: None
        self.lag: Lag = {}
        self.held_open: Spans = {}
        """Assigned partitions a transaction holds open, as of the last statistics."""
        self.stats_seen = 0
        """How many statistics the consumer has reported (``held_open`` is new when it moves)."""
        """The consumer's lag per partition, as librdkafka last reported it (``metrics``)."""
        self._helper = self._new_helper()

    def _new_helper(self) -> HelperThread:
        return HelperThread(f"sagalog-{self.agent}-bounded")

    def _who(self) -> str:
        return f"agent '{self.agent}' instance '{self.settings.instance_id}'"

    def connect(self) -> None:
        """A transactional producer and a subscribed consumer, retried with backoff
        while the broker does not answer, for at most ``outage_limit_s``.

        Raises:
            ServiceUnavailableError: the broker did not answer within the bound (exit 3).
        """

        def attempt() -> None:
            # The producer first: its init_transactions fences a predecessor with the
            # same transactional.id (an earlier client of this process included) and
            # aborts the transaction it left open.
            self.producer = self.new_producer()
            self.consumer = self.new_consumer()

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
                policy=OUTAGE_BACKOFF,
                within_s=self.settings.outage_limit_s,
                retry_on=(KafkaException,),
                on_retry=retrying,
            )
        except KafkaException as exc:
            raise ServiceUnavailableError(
                f"{self._who()}: Kafka at {self.settings.bootstrap_servers} did not answer for "
                f"{self.settings.outage_limit_s:g}s (SAGALOG_AGENT_OUTAGE_LIMIT_S): {exc}"
            ) from exc

    def recover(self, exc: SagalogError | KafkaException, *, fenced: bool) -> None:
        """Close both clients and build new ones; the projection and the ledger stay.

        Raises:
            ConsumerFailed: fenced more than ``max_rejoins`` times in ten minutes.
            ServiceUnavailableError: the broker did not answer for ``outage_limit_s``.
        """
        if fenced and not self.rejoins.take(self.clock()):
            raise ConsumerFailed(
                f"{self._who()}: the consumer was fenced {self.settings.max_rejoins + 1} times "
                f"in ten minutes ({exc}); another live instance may have this instance id. "
                "Give every instance its own SAGALOG_AGENT_INSTANCE_ID; exiting "
                f"{ConsumerFailed.exit_code}"
            ) from exc
        self.telemetry.stats.rebuilt += 1
        self.health.degrade("kafka", str(exc))
        self.telemetry.log(
            "recover",
            f"{exc}; closing the consumer and the producer and building new ones (offsets "
            "resume from the committed ones, the projection stays)",
            level=logging.WARNING,
            outcome="rebuild",
        )
        self.drop()
        self.connect()

    def drop(self) -> None:
        """Forget the clients; close them in a thread that may hang without holding us.

        The old producer is not flushed nor its transaction aborted (both wait for the
        broker): the next producer's init_transactions aborts it on the broker.
        """
        consumer, producer = self.consumer, self.producer
        self.consumer = self.producer = None
        self.consumer_fatal = None
        self.assign_failed = None
        self.on_drop()

        def close() -> None:
            # The old producer's transaction is aborted here if it can be (its calls
            # done, the broker there), before the next producer exists: a request of
            # the old one that lands after the next one's init_transactions can leave
            # an offset commit hanging (``Transactions.resolve_hanging_offsets``).
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

    def close(self) -> None:
        """Leave the group and flush; for a clean stop."""
        with contextlib.suppress(Exception):
            if self.consumer is not None:
                self.consumer.close()
        with contextlib.suppress(Exception):
            if self.producer is not None:
                self.producer.flush(5)
        self._helper.shutdown()

    def new_consumer(self) -> Consumer:
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
                    # latency while records flow, only empty fetches that cost the broker
                    # CPU for every idle agent (docs/design/tuning-measurements.md); at
                    # 100 ms that cost is lost in the noise. Not librdkafka's 500 ms: a
                    # partition resumed or assigned meanwhile waits for the fetch in
                    # flight, and a rate-limited agent idle that long refills its burst.
                    "fetch.wait.max.ms": 100,
                    "enable.partition.eof": False,
                    "error_cb": self._on_consumer_error,
                    "statistics.interval.ms": STATS_INTERVAL_MS,
                    "stats_cb": self._on_consumer_stats,
                    **fetch_pacing(self.settings),
                }
            )
        )
        consumer.subscribe(
            self.topics,
            on_assign=lambda c, p: self.on_assign(c, p),
            on_revoke=lambda c, p: self.on_revoke(c, p),
            on_lost=lambda c, p: self.on_revoke(c, p),
        )
        return consumer

    def new_producer(self) -> Producer:
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

    def _on_consumer_stats(self, stats_json: str) -> None:
        self.lag = consumer_lag(stats_json)
        self.held_open = held_open(stats_json)
        self.stats_seen += 1

    def _on_consumer_error(self, error: KafkaError) -> None:
        """librdkafka's client-level errors: a fatal one rebuilds the clients
        (``ConsumerFailed``); all brokers away degrades the health."""
        if is_fatal(error):
            self.consumer_fatal = error
        elif error.code() in BROKER_AWAY:
            self.health.degrade("kafka", error.str())

    def answered(self) -> None:
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

    def raise_if_consumer_failed(self, error: KafkaError | None = None) -> None:
        """Raise ``ConsumerFailed`` for ``error`` if fatal, or for a fatal error the
        error callback saw."""
        error = error if error is not None and is_fatal(error) else self.consumer_fatal
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
            f"{self._who()}: fatal consumer error ({error.str()}): nothing uncommitted is "
            "lost, the batch is redelivered"
        )

    def bounded(self, call: Callable[[], None], *, timeout_s: float, what: str) -> None:
        """Run a librdkafka call that may block past its own timeout; abandon it if it does.

        librdkafka's ``send_offsets_to_transaction`` ignores its timeout when the group
        coordinator goes away mid-call (confluentinc/librdkafka#5456, #5511), and it
        hangs as well when the consumer whose group metadata it carries is fenced
        meanwhile (docs/design/incident-history.md). A C call cannot be interrupted,
        and whether a replacement producer with the same transactional.id would release
        it does not matter: the call is
        left to its thread, and the clients are built anew (``ClientHung`` or
        ``ConsumerFailed`` to the run loop). The new producer's init_transactions bumps
        the epoch, so the abandoned producer can never commit, and aborts its open
        transaction on the broker; the new consumer resumes from the committed offsets.
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
            if self.consumer_fatal is None and self.clock() < deadline:
                continue
            # Abandoned: its thread may never come back, so later calls get a new one
            # (a daemon thread: the process can still exit, ``helper_thread``).
            self._helper.shutdown()
            self._helper = self._new_helper()
            if self.consumer_fatal is not None:
                self.raise_if_consumer_failed()
            self.telemetry.log(
                "transaction",
                f"{what} still blocked after {timeout_s:g}s (librdkafka ignores its timeout when "
                "the coordinator went away); abandoning it and building new clients",
                level=logging.ERROR,
                outcome="hung",
            )
            raise ClientHung(f"{self._who()}: {what} blocked past {timeout_s:g}s")
