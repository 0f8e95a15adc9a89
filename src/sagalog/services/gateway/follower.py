"""The background consumer that keeps the read model up to date.

It reads two logs with a plain ``assign`` (no consumer group to rebalance, no
offsets committed to Kafka): the tracker's records changelog (compacted: the latest
record per workflow) and the transitions topic (every state change). Each batch of
messages is written to RocksDB together with the offsets it reaches, and a restart
resumes from those offsets.

**Ready** means every partition has been read up to where it ended when the
follower started (the high watermarks it saw then), so the gateway does not answer
"unknown workflow" for one it simply has not read yet. **Lag** is how many records
the broker holds beyond what the model has applied, refreshed every
``lag_interval_s``.

**A broker away** is an outage the follower rides out: librdkafka's consumer reconnects
by itself, so the loop keeps running; a watermark or metadata call that times out marks
the follower ``degraded`` (``/healthz`` says what and since when) and is retried with
backoff (``RetryPolicy``, 0.5 s up to ``outage_retry_s``), and a follower that must
start again (its consumer failed) starts from the stored offsets. Once ready it stays
ready: the read model answers from RocksDB whatever the broker does, only later than the
log (the lag says by how much). A follower that stopped at a watermark timeout would
wait for a broker that is not there, and the gateway would answer 503 to every request
for the whole outage.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from sagalog.authorization import authorization_error, topic_denied
from sagalog.backoff import RetryPolicy
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import H_ID, H_WORKFLOW_ID, header_dict
from sagalog.errors import SagalogError
from sagalog.health import HealthBook, logged_changes
from sagalog.memory import release_free_memory
from sagalog.services.gateway.read_model import ReadModel, TransitionEntry
from sagalog.services.gateway.settings import GatewaySettings

log = logging.getLogger("sagalog.gateway")

BATCH = 500
TRIM_AFTER = 10_000  # records applied since the last heap trim
POLL_S = 0.2
MEASURE_TIMEOUT_S = 2.0  # per watermark call, on the consuming thread: fail fast, retry later
BROKER = "kafka"
OUTAGE_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
    }
)


@dataclass
class FollowerStatus:
    """What ``/healthz`` reports; replaced, never mutated, so readers need no lock."""

    ready: bool = False
    health: str = "starting"
    lag: int | None = None
    waiting_for: str | None = None
    applied: int = 0
    skipped: int = 0
    last_error: str | None = None
    partitions: dict[str, int] = field(default_factory=dict)
    problems: dict[str, Any] = field(default_factory=dict)


def transition_entry(payload: dict[str, Any], *, event_id: str) -> TransitionEntry:
    """A decoded ``StateTransition`` payload as the read model keeps it."""
    at = payload["at"]
    at_ms = int(at.timestamp() * 1000) if isinstance(at, dt.datetime) else int(at)
    return TransitionEntry(
        event_id=event_id,
        flow=payload["flow"],
        flow_version=payload["flow_version"],
        from_state=payload["from_state"],
        to_state=payload["to_state"],
        step=payload.get("step"),
        from_step=payload.get("from_step"),
        cause_event_id=payload["cause_event_id"],
        time_in_previous_state_ms=payload["time_in_previous_state_ms"],
        at_ms=at_ms,
    )


def lag_of(*, high: int, low: int, applied: int | None, end_seen: int | None) -> int:
    """Records the broker holds past what the model applied, for one partition.

    Args:
        high: the partition's high watermark.
        low: its log start (what compaction or retention removed is not lag).
        applied: the offset after the last record applied (None: none yet).
        end_seen: where the consumer last reported the partition's end (its EOF).
            The tracker writes in transactions, and the commit marker after its last
            record takes an offset no reader receives: the applied offset alone stays
            one short for good, the lag never reads 0, and the gateway would never give
            its rebuild's peak back (idle RSS = peak).
    """
    return max(0, high - max(low, applied or 0, end_seen or 0))


class Follower:
    """Consumes the changelog and the transitions into the read model, in a thread."""

    def __init__(self, settings: GatewaySettings, *, model: ReadModel, codec: EventCodec) -> None:
        self.settings = settings
        self.model = model
        self.codec = codec
        self.topics = (settings.records_changelog, settings.transitions_topic)
        self.status = FollowerStatus(waiting_for="start")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._targets: dict[tuple[str, int], int] = {}
        self._caught_up: set[tuple[str, int]] = set()
        self._ends_seen: dict[tuple[str, int], int] = {}  # each partition's last EOF offset
        self._applied = 0
        self._applied_at_trim = 0
        self._skipped = 0
        self.health = HealthBook(
            on_change=logged_changes(log, agent="gateway", subject="read model follower")
        )  # written by the follower's thread only
        self.backoff = RetryPolicy(base_delay_s=0.5, max_delay_s=settings.outage_retry_s)
        self._failures = 0  # consecutive failed tries to reach the broker
        self._next_measure = 0.0

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._supervise, name="gateway-follower", daemon=True
        )
        self._thread.start()

    @property
    def alive(self) -> bool:
        """The follower's thread runs (started and not ended)."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the loop ------------------------------------------------------------------

    def _supervise(self) -> None:
        """Run the loop; after a failure, start again from the stored offsets, with backoff."""
        while not self._stop.is_set():
            self._run()
            self._stop.wait(self._retry_delay())

    def _run(self) -> None:
        config = self.settings.kafka_config(
            **{
                # Required by librdkafka, never used: partitions are assigned by hand.
                "group.id": f"sagalog-gateway-{self.settings.instance_id}-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                # librdkafka prefetches up to 64 MB by default: catching up on a long
                # backlog would grow the heap once and keep it grown.
                "queued.max.messages.kbytes": 8192,
            }
        )
        consumer = Consumer(config)
        try:
            assignment = self._wait_for_topics(consumer)
            if assignment is None:
                return
            consumer.assign(assignment)
            self._publish_status(last_error=None)
            self._next_measure = 0.0
            while not self._stop.is_set():
                messages = consumer.consume(BATCH, POLL_S)
                self._apply(messages)
                if time.monotonic() >= self._next_measure:
                    self._measure(consumer, assignment)
        except KafkaException as exc:  # the broker is away or moving: start again later
            self._degraded(exc)
            log.warning(
                "the read model follower starts again (the broker did not answer): %s",
                exc,
                extra={"sagalog": {"agent": "gateway", "action": "outage"}},
            )
        except Exception as exc:  # the thread must report, not vanish
            log.exception("the read model follower stopped")
            self._failures += 1
            self.health.degrade("follower", f"{exc.__class__.__name__}: {exc}")
            self._publish_status(last_error=f"{exc.__class__.__name__}: {exc}")
        finally:
            consumer.close()

    def _wait_for_topics(self, consumer: Consumer) -> list[TopicPartition] | None:
        """The assignment, once both topics exist; None when stopped while waiting."""
        stored = self.model.positions()
        self._targets.clear()
        self._caught_up.clear()
        self._ends_seen.clear()
        while not self._stop.is_set():
            metadata = consumer.list_topics(timeout=self.settings.connect_timeout_s)
            self._answered()
            missing = [
                t for t in self.topics if t not in metadata.topics or metadata.topics[t].error
            ]
            if not missing:
                break
            timeout = self.settings.connect_timeout_s
            denied = topic_denied(consumer, missing[0], timeout=timeout)
            if denied is not None:  # not "missing": this principal may not see it
                failure = authorization_error(
                    self.settings, denied, operation="DESCRIBE", resource=missing[0]
                )
                log.error(
                    "%s", failure, extra={"sagalog": {"agent": "gateway", "action": "follow"}}
                )
                self._publish_status(
                    waiting_for=f"READ on topic {missing[0]}", last_error=str(failure)
                )
            else:
                self._publish_status(
                    waiting_for=f"topic {missing[0]} (has the saga tracker "
                    f"'{self.settings.tracker_app_id}' started?)"
                )
            self._stop.wait(1.0)
        else:
            return None
        assignment = []
        for topic in self.topics:
            for partition in sorted(metadata.topics[topic].partitions):
                offset = stored.get((topic, partition), OFFSET_BEGINNING)
                assignment.append(TopicPartition(topic, partition, offset))
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=self.settings.connect_timeout_s
                )
                self._targets[(topic, partition)] = high
                if offset != OFFSET_BEGINNING and offset >= high:
                    self._caught_up.add((topic, partition))
        log.info(
            "following %s from %s",
            ", ".join(self.topics),
            "stored offsets" if stored else "the beginning",
            extra={"sagalog": {"agent": "gateway", "action": "follow"}},
        )
        self._publish_status(waiting_for=None)
        return assignment

    def _apply(self, messages: list[Any]) -> None:
        batch = self.model.batch()
        positions: dict[tuple[str, int], int] = {}
        for message in messages:
            error = message.error()
            place = (message.topic(), message.partition())
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    self._caught_up.add(place)
                    self._ends_seen[place] = message.offset()
                else:
                    if error.code() in OUTAGE_ERRORS:
                        self.health.degrade(BROKER, error.str())
                    self._publish_status(last_error=error.str())
                continue
            try:
                self._apply_one(batch, message)
            except (SagalogError, ValueError, KeyError, TypeError) as exc:
                self._skipped += 1
                log.warning(
                    "skipped %s[%d]@%d: %s",
                    *place,
                    message.offset(),
                    exc,
                    extra={"sagalog": {"agent": "gateway", "action": "skip"}},
                )
            positions[place] = message.offset() + 1
            if message.offset() + 1 >= self._targets.get(place, 0):
                self._caught_up.add(place)
        for (topic, partition), offset in positions.items():
            batch.advance(topic, partition, offset)
        if positions:
            self._applied += batch.size
            batch.commit()
        # Once caught up, always ready: a follower that starts again after an outage
        # still has the model it had, and answers from it while it catches up.
        ready = self.health.started or (
            bool(self._targets) and self._caught_up >= set(self._targets)
        )
        if ready and not self.health.started:
            self.health.ready()
        if ready != self.status.ready or positions:
            self._publish_status(ready=ready)

    def _apply_one(self, batch: Any, message: Any) -> None:
        if message.topic() == self.settings.records_changelog:
            key = message.key()
            if not key:
                raise ValueError("changelog record without a key")
            batch.put_record(key.decode(), message.value())
            return
        headers = header_dict(message.headers())
        workflow_id = headers.get(H_WORKFLOW_ID) or (message.key() or b"").decode()
        payload = self.codec.decode(message.value()).payload
        entry = transition_entry(payload, event_id=headers.get(H_ID, ""))
        batch.add_transition(
            workflow_id, entry, partition=message.partition(), offset=message.offset()
        )

    def _measure(self, consumer: Consumer, assignment: list[TopicPartition]) -> None:
        """Lag per partition; a broker that does not answer leaves the last figures and
        degrades the health until a later try (with backoff) gets an answer."""
        positions = self.model.positions()
        lag, by_partition = 0, {}
        for tp in assignment:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition),
                    timeout=min(self.settings.connect_timeout_s, MEASURE_TIMEOUT_S),
                )
            except KafkaException as exc:
                self._degraded(exc)
                self._next_measure = time.monotonic() + self._retry_delay()
                return
            place = (tp.topic, tp.partition)
            behind = lag_of(
                high=high,
                low=low,
                applied=positions.get(place),
                end_seen=self._ends_seen.get(place),
            )
            lag += behind
            by_partition[f"{tp.topic}[{tp.partition}]"] = behind
        if lag == 0 and self._applied - self._applied_at_trim >= TRIM_AFTER:
            self._applied_at_trim = self._applied
            release_free_memory()  # caught up after a burst: hand the peak back
        self._answered()
        self._next_measure = time.monotonic() + self.settings.lag_interval_s
        self._publish_status(lag=lag, partitions=by_partition)

    # -- health ----------------------------------------------------------------------

    def _degraded(self, exc: KafkaException) -> None:
        error = exc.args[0].str() if exc.args and isinstance(exc.args[0], KafkaError) else exc
        self._failures += 1
        self.health.degrade(BROKER, str(error))
        self._publish_status(last_error=str(error))

    def _answered(self) -> None:
        """The broker answered: the backoff starts from the beginning again."""
        self._failures = 0
        self.health.recover("follower")
        down_s = self.health.recover(BROKER)
        if down_s is not None:
            log.info(
                "the broker answers again after %.1f s",
                down_s,
                extra={
                    "sagalog": {
                        "agent": "gateway",
                        "action": "recovered",
                        "duration_ms": int(down_s * 1000),
                    }
                },
            )
            self._publish_status(last_error=None)

    def _retry_delay(self) -> float:
        return max(0.2, self.backoff.delay(max(1, self._failures)))

    def _publish_status(self, **changes: Any) -> None:
        current = self.status
        self.status = FollowerStatus(
            ready=changes.get("ready", current.ready),
            health=str(self.health.status),
            lag=changes.get("lag", current.lag),
            waiting_for=changes.get("waiting_for", current.waiting_for),
            applied=self._applied,
            skipped=self._skipped,
            last_error=changes.get("last_error", current.last_error),
            partitions=changes.get("partitions", current.partitions),
            problems=dict(self.health.describe()["problems"]),  # type: ignore[call-overload]
        )
