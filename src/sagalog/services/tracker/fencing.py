"""Fencing a tracker worker that lost its partitions while it was paused.

A worker stopped (SIGSTOP, a stall, a frozen VM) past its session is dropped from the
group and its partitions move on. When it wakes it still holds the batch it was
deciding and, until its next heartbeat, believes it owns them. Unfenced, it publishes
that batch's commands and transitions for partitions another worker now decides, and
writes their changelogs behind the new owner's back.

**The fence: one transactional producer per partition**, ``transactional.id``
``<app id>-p<partition>``, the same whichever worker holds the partition. A worker
that takes partition *p* initializes that id before it reads *p*'s changelog
(``restore``). The coordinator then aborts whatever the previous holder left open and
refuses every later send or commit from it (``PRODUCER_FENCED``). Each batch writes a
partition's events, alerts, dead letters and changelog records in that partition's
transaction; ``read_committed`` readers (agents, the gateway, the next owner's
restore, analytics) see all of a batch or none of it.

Why this and not the alternatives:

- **KIP-447** (one producer per worker, input offsets sent with the group membership,
  as Kafka Streams' exactly-once v2 does) fences at the offset commit. Its safety
  needs the next owner to read committed offsets with ``require_stable``, which
  aiokafka (faust's consumer) does not send: a worker paused between its offset
  commit and its ``EndTxn`` would then have its batch made visible after the next
  owner had decided it again. Tried in session 13 (``0d92915``) and backed out.
- **An epoch check** (compare a stored owner epoch before publishing) leaves the
  window between the check and the send, which a pause can fall into, and every
  reader would have to learn to drop stale epochs.

The cost is a producer per owned partition and a commit per partition per batch;
the commits run in parallel threads. Input offsets stay outside the transaction,
committed as before (``offsets``): a batch committed but whose offsets were not is
read again, and the records it stored make every input a duplicate that changes
nothing (``processor``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.errors import SagalogError, ServiceUnavailableError
from sagalog.kafka_errors import FENCED_PRODUCER
from sagalog.services.tracker.settings import TrackerSettings

log = logging.getLogger("sagalog.tracker")

#: Tries of a commit that failed with a retriable error before the batch is given up.
COMMIT_TRIES = 3

#: A commit slower than this is logged: far over a commit's usual milliseconds, well under
#: the stall timeout, so the log names the call a waiting batch is in.
SLOW_COMMIT_S = 5.0


class PartitionsFenced(SagalogError):
    """Another worker initialized these partitions' transactional ids: they are its now.

    Nothing of the batch is visible (its transactions were aborted by the new owner),
    and nothing of it is stored; the worker exits ``RESTART`` and rejoins afresh.
    """


class BatchAborted(SagalogError):
    """A partition's transaction could not commit and was aborted; the batch is decided
    again by whoever holds the partition next."""


def transactional_id(prefix: str, partition: int) -> str:
    """The id of partition ``partition``'s producer: the same on every worker, so that
    the one taking the partition over fences the one that had it."""
    return f"{prefix}p{partition}"


class PartitionTransactions:
    """The transactional producers of the partitions this worker holds.

    Args:
        settings: the tracker's (cluster, app id, transaction timeout).
        config: librdkafka producer configuration shared by every partition's producer.
        make_producer: builds a producer from a configuration (a seam for tests).
    """

    def __init__(
        self,
        settings: TrackerSettings,
        config: dict[str, Any],
        *,
        make_producer: Callable[[dict[str, Any]], Any] = Producer,
    ) -> None:
        self.settings = settings
        self.config = config
        self.make_producer = make_producer
        self.producers: dict[int, Any] = {}
        self.open: set[int] = set()
        self.ended: Counter[str] = Counter()
        """Transactions ended, by outcome: ``committed`` or ``aborted`` (``metrics``)."""
        self._threads = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tracker-transactions")

    def id_of(self, partition: int) -> str:
        return transactional_id(self.settings.transactional_id_prefix, partition)

    async def take(self, partitions: Iterable[int]) -> None:
        """Initialize a producer for each partition: from now on every previous holder of
        one is fenced, and any transaction it left open is aborted.

        Raises:
            AuthorizationError: the cluster denies WRITE on the transactional id.
            ServiceUnavailableError: the coordinator did not answer in time.
        """
        wanted = sorted(set(partitions))
        self.release(wanted)
        loop = asyncio.get_running_loop()
        made = await asyncio.gather(
            *(loop.run_in_executor(self._threads, self._init, p) for p in wanted)
        )
        self.producers.update(zip(wanted, made, strict=True))
        if wanted:
            log.info(
                "transactional ids taken for partitions %s (previous holders fenced)",
                wanted,
                extra={"sagalog": {"agent": "saga-tracker", "action": "fence"}},
            )

    def release(self, partitions: Iterable[int] | None = None) -> None:
        """Drop the producers of ``partitions`` (all when None): the partitions were
        revoked, or are about to be taken again with a fresh producer."""
        for partition in list(self.producers if partitions is None else partitions):
            producer = self.producers.pop(partition, None)
            if producer is not None and partition in self.open:
                # Fenced or away, it raises: the next holder's init aborts it on the broker.
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(5.0)
            self.open.discard(partition)

    def producer(self, partition: int) -> Any:
        """The producer of ``partition``, inside a transaction (begun at its first use).

        Raises:
            PartitionsFenced: the partition is not held here (taken over, or revoked).
        """
        producer = self.producers.get(partition)
        if producer is None:
            raise PartitionsFenced(
                f"partition {partition} is not held by this worker any more "
                f"({self.id_of(partition)}); nothing of the batch is published"
            )
        if partition not in self.open:
            try:
                producer.begin_transaction()
            except KafkaException as exc:
                raise self._failure([partition], exc.args[0]) from exc
            self.open.add(partition)
        return producer

    def send(self, owner: int, topic: str, **record: Any) -> None:
        """Produce ``record`` to ``topic`` in the transaction of partition ``owner`` (the
        input partition that caused it; the record may go to any partition of ``topic``).

        Raises:
            PartitionsFenced: ``owner`` is not held here, or its producer was fenced.
        """
        producer = self.producer(owner)
        try:
            try:
                producer.produce(topic, **record)
            except BufferError:
                producer.poll(0.5)  # librdkafka's queue is full: let it drain, then retry
                producer.produce(topic, **record)
        except KafkaException as exc:
            raise self._failure([owner], exc.args[0]) from exc

    async def commit(self) -> None:
        """Commit every open transaction, in parallel; all or the first failure raised.

        Raises:
            PartitionsFenced: a partition's transactional id was taken by another worker.
            BatchAborted: a transaction had to be aborted (or never answered).
            AuthorizationError: the cluster refused a write for a missing right.
        """
        partitions, self.open = sorted(self.open), set()
        if not partitions:
            return
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            *(loop.run_in_executor(self._threads, self._commit, p) for p in partitions)
        )
        failures = [(p, error) for p, error in zip(partitions, results, strict=True) if error]
        self.ended["committed"] += len(partitions) - len(failures)
        self.ended["aborted"] += len(failures)
        if failures:
            raise self._failure([p for p, _ in failures], failures[0][1])

    def abort(self) -> None:
        """Abort whatever is open (best effort: a batch that failed before its commit)."""
        self.ended["aborted"] += len(self.open)
        for partition in sorted(self.open):
            # Fenced or away, it raises: the next holder's init aborts it on the broker.
            with contextlib.suppress(KafkaException):
                self.producers[partition].abort_transaction(5.0)
        self.open.clear()

    def close(self) -> None:
        self.abort()
        for producer in self.producers.values():
            producer.flush(5.0)
        self.producers.clear()
        self._threads.shutdown(wait=False)

    # -- in the producer threads ----------------------------------------------------

    def _init(self, partition: int) -> Any:
        producer = self.make_producer({**self.config, "transactional.id": self.id_of(partition)})
        try:
            producer.init_transactions(self.settings.transaction_timeout_s)
        except KafkaException as exc:
            error = exc.args[0]
            if is_authorization_failure(error):
                raise authorization_error(
                    self.settings, error, operation="WRITE", resource=self.id_of(partition)
                ) from exc
            raise ServiceUnavailableError(
                f"the transaction coordinator at {self.settings.bootstrap_servers} did not "
                f"initialize {self.id_of(partition)}: {error.str()}"
            ) from exc
        return producer

    def _commit(self, partition: int) -> KafkaError | None:
        """Commit one partition's transaction; the error that ended it, or None.

        A commit that took long is logged with its partition: it is what a batch in hand
        waits on when a leader is cut off from its peers (the stall watch waits with it).
        """
        producer = self.producers[partition]
        started = time.monotonic()
        for _ in range(COMMIT_TRIES):
            try:
                producer.commit_transaction(self.settings.transaction_timeout_s)
                took_s = time.monotonic() - started
                if took_s >= SLOW_COMMIT_S:
                    log.warning(
                        "%s's transaction took %.1f s to commit (waiting for the broker)",
                        self.id_of(partition),
                        took_s,
                        extra={
                            "sagalog": {
                                "agent": "saga-tracker",
                                "action": "slow_commit",
                                "duration_ms": int(took_s * 1000),
                            }
                        },
                    )
                return None
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.retriable() and not error.fatal():
                    continue
                if error.txn_requires_abort():
                    with contextlib.suppress(KafkaException):  # else the next holder's init
                        producer.abort_transaction(self.settings.transaction_timeout_s)
                return error
        return KafkaError(KafkaError._TIMED_OUT, "commit_transaction kept timing out")

    def _failure(self, partitions: list[int], error: KafkaError) -> SagalogError:
        ids = ", ".join(self.id_of(p) for p in partitions)
        if is_authorization_failure(error):
            return authorization_error(self.settings, error, operation="WRITE", resource=ids)
        # A send refused after the fence reports librdkafka's generic _FATAL (whose
        # ``fatal()`` is False); the error underneath is the fence.
        if error.code() in FENCED_PRODUCER or error.code() == KafkaError._FATAL or error.fatal():
            for partition in partitions:  # fenced producers refuse everything from now on
                self.producers.pop(partition, None)
            return PartitionsFenced(
                f"partitions {partitions} were taken over by another worker ({ids}: "
                f"{error.str()}); the batch did not commit and nothing of it is visible"
            )
        return BatchAborted(
            f"the batch's transaction for partitions {partitions} was aborted "
            f"({ids}: {error.str()}); it will be decided again"
        )
