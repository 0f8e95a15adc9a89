"""The agent's transaction: a batch's records produced and its offsets committed as one.

If the transaction aborts, nothing it produced is visible and the consumer rewinds
to the committed offsets: the batch runs again, and the effect ledger keeps
confirmed side effects from repeating. A fenced producer means another instance with
the same ``transactional.id`` took over: this one is a zombie and stops. A missing
right aborts and stops too: retrying would fail the same way.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message, TopicPartition

from sagalog.agents.connection import KafkaClients
from sagalog.agents.exceptions import (
    ClientHung,
    ConsumerFailed,
    TransactionTimedOut,
    ZombieFenced,
)
from sagalog.agents.outputs import Result
from sagalog.agents.telemetry import AgentTelemetry
from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.kafka_errors import FENCED_PRODUCER
from sagalog.open_transactions import closer


class Transactions:
    """Commits batches through an instance's clients, and handles what goes wrong."""

    def __init__(
        self,
        *,
        clients: KafkaClients,
        first_topic: str,
        telemetry: AgentTelemetry,
        clock: Callable[[], float],
    ) -> None:
        """Args:
        first_topic: an input topic of the agent, whose partition 0 any group
            offset commit can name.
        """
        self.clients = clients
        self.settings = clients.settings
        self.first_topic = first_topic
        self.telemetry = telemetry
        self.stats = telemetry.stats
        self.clock = clock
        self.started = float("inf")  # when the open transaction began (clock)

    def commit(self, results: Sequence[Result], *, closers: Sequence[tuple[str, int]] = ()) -> bool:
        """Produce every result's records and commit the offsets in one transaction.

        ``closers``: input partitions held open, each to get an ``OpenTransactionClosed``
        in this transaction (``sagalog.open_transactions``).

        Returns:
            False when the transaction aborted (the consumer is rewound and the batch
            runs again).
        """
        clients = self.clients
        assert clients.producer is not None and clients.consumer is not None
        producer, consumer = clients.producer, clients.consumer
        self.started = float("inf")  # a begin that fails is no old transaction
        denied: list[tuple[str, KafkaError]] = []  # topics the principal may not write

        def delivered(error: KafkaError | None, message: Message) -> None:
            if is_authorization_failure(error):
                denied.append((str(message.topic()), error))  # type: ignore[arg-type]

        try:
            producer.begin_transaction()
            self.started = self.clock()
            for result in results:
                for topic, key, value, headers in result.records:
                    producer.produce(
                        topic, key=key, value=value, headers=headers, on_delivery=delivered
                    )
            for topic, partition in closers:
                closer_key, closer_headers = closer(
                    source=f"sagalog/{clients.agent}", writer=clients.agent, partition=partition
                )
                producer.produce(
                    topic,
                    partition=partition,
                    key=closer_key,
                    value=None,
                    headers=closer_headers,
                    on_delivery=delivered,
                )
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            # A fenced consumer's group metadata makes this call hang past its timeout.
            clients.raise_if_consumer_failed()
            metadata, timeout_s = (
                consumer.consumer_group_metadata(),
                self.settings.connect_timeout_s * 3,
            )
            clients.bounded(
                lambda: producer.send_offsets_to_transaction(positions, metadata, timeout_s),
                timeout_s=timeout_s + 30,
                what="send_offsets_to_transaction",
            )
            producer.commit_transaction(self.settings.transaction_timeout_s)
        except KafkaException as exc:
            self.raise_if_denied(exc, denied)
            self._on_error(exc)
            return False
        self.stats.transactions += 1
        if clients.health.problems:
            clients.answered()
        return True

    def resolve_hanging_offsets(self) -> None:
        """End a transactional offset commit left hanging on the group, with a transaction
        of our own over the group's offsets that is aborted at once.

        A read_committed consumer reads committed offsets only once no transaction
        holds offsets of the group pending, and retries until its timeout while one
        does (UNSTABLE_OFFSET_COMMIT). One can hang for good: a producer abandoned in a
        rebuild (its call hung, its consumer fenced) whose TxnOffsetCommit reached the
        group after the new producer's init_transactions had aborted its transaction,
        so no marker ever ends it, and every assignment of the group times out, the
        agent's and any other consumer's (docs/design/incident-history.md). The
        coordinator ends a producer id's pending offsets on any marker of that producer
        id, so this abort, ours with a newer epoch, ends them.
        """
        clients = self.clients
        assert clients.producer is not None and clients.consumer is not None
        producer, consumer = clients.producer, clients.consumer
        timeout_s = self.settings.connect_timeout_s
        try:
            producer.begin_transaction()
            clients.bounded(
                lambda: producer.send_offsets_to_transaction(
                    [TopicPartition(self.first_topic, 0, 0)],  # any offset: the abort drops it
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

    def raise_if_denied(self, exc: KafkaException, denied: list[tuple[str, KafkaError]]) -> None:
        """Abort and stop on a missing right: retrying the batch would fail the same way.

        A refused write shows up as the commit's "message(s) failed delivery" with
        TOPIC_AUTHORIZATION_FAILED in the record's delivery report; a refused group
        or transactional id as the transaction's own error.
        """
        error: KafkaError = exc.args[0]
        if not denied and not is_authorization_failure(error):
            return
        producer = self.clients.producer
        assert producer is not None
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(self.settings.connect_timeout_s)
        self.stats.aborted += 1
        if denied:
            topic, error = denied[0]
            failure = authorization_error(self.settings, error, operation="WRITE", resource=topic)
        elif error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            failure = authorization_error(
                self.settings, error, operation="READ", resource=self.clients.group_id
            )
        else:  # the transactional id, or a topic the delivery reports did not name
            resource = self.clients.transactional_id
            if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                resource = "(one written in this transaction)"
            failure = authorization_error(
                self.settings, error, operation="WRITE", resource=resource
            )
        self.telemetry.log(
            "transaction", f"transaction aborted: {failure}", level=logging.ERROR, outcome="denied"
        )
        raise failure from exc

    def _on_error(self, exc: KafkaException) -> None:
        clients = self.clients
        assert clients.producer is not None
        error: KafkaError = exc.args[0]
        self.stats.aborted += 1
        self.telemetry.log(
            "transaction",
            f"transaction failed: {error.str()}",
            level=logging.WARNING,
            outcome="aborted",
        )
        open_s = self.clock() - self.started
        if error.code() in FENCED_PRODUCER and open_s >= self.settings.transaction_timeout_s:
            # Not a newer instance: the coordinator aborted this transaction because it
            # outlived transaction.timeout.ms (a broker outage in its middle) and bumped
            # the epoch, which librdkafka reports as fenced, as it does a takeover. A
            # genuine takeover fences a young transaction; this one is cured by new
            # clients.
            raise TransactionTimedOut(
                f"the transaction was open {open_s:.0f}s, past transaction.timeout.ms "
                f"({self.settings.transaction_timeout_s:g}s), and the coordinator aborted it "
                f"({error.str()})"
            ) from exc
        if error.code() in FENCED_PRODUCER:
            raise ZombieFenced(
                f"instance '{self.settings.instance_id}' of agent '{clients.agent}' was fenced: "
                "another instance with the same instance id took over; this one stops. Give "
                "every live instance its own SAGALOG_AGENT_INSTANCE_ID"
            ) from exc
        if error.fatal():
            with contextlib.suppress(KafkaException):
                clients.producer.abort_transaction(self.settings.connect_timeout_s)
            clients.producer = clients.new_producer()
        else:
            # An abort that times out stays "in progress" in librdkafka, and every later
            # transactional call is refused as conflicting with it ("Conflicting
            # abort_transaction API call is already in progress", for good): the error goes
            # to the run loop, which builds new clients, whose init_transactions aborts the
            # transaction on the broker.
            clients.producer.abort_transaction(self.settings.connect_timeout_s)
        self.rewind()

    def rewind(self) -> None:
        """Seek every assigned partition back to its committed offset."""
        consumer = self.clients.consumer
        assert consumer is not None
        assignment = consumer.assignment()
        if not assignment:
            return
        for tp in consumer.committed(assignment, timeout=self.settings.connect_timeout_s):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            with contextlib.suppress(KafkaException):
                consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
