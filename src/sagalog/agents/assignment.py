"""Which partitions an instance reads, and when: assignment, hydration and retry holds.

A partition assigned with a committed offset ahead of the local checkpoint is paused
until its projection is rebuilt from the log (``hydration``): a handler never sees a
context missing events that were handled before. A retry partition whose head is not
due is paused until it is (``triage.hold_not_due``), instead of spinning on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from sagalog.agents.connection import KafkaClients
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.hydration import hydrate
from sagalog.agents.records import headers_of
from sagalog.agents.routing import read_mark
from sagalog.agents.state_store import StateStore
from sagalog.agents.telemetry import AgentTelemetry
from sagalog.agents.triage import hold_not_due
from sagalog.position import RecordPosition


class Assignment:
    """The instance's partitions: paused for hydration or for a retry not yet due."""

    def __init__(
        self,
        *,
        clients: KafkaClients,
        inputs: Sequence[str],
        retry_topic: str,
        partitions: int,
        store: StateStore,
        flow: FlowControl,
        telemetry: AgentTelemetry,
        wall_ms: Callable[[], int],
    ) -> None:
        """Args:
        inputs: the agent's input topics (the first one counts the partitions the
            rate limits are shared by).
        partitions: the partitions of each input topic.
        """
        self.clients = clients
        self.settings = clients.settings
        self.inputs = tuple(inputs)
        self.retry_topic = retry_topic
        self.partitions = partitions
        self.store = store
        self.flow = flow
        self.telemetry = telemetry
        self.wall_ms = wall_ms
        self.paused_until: dict[tuple[str, int], int] = {}
        self.to_hydrate: dict[tuple[str, int], int] = {}
        self.joined = False
        """The group assigned this consumer its partitions (none is an assignment too)."""
        clients.on_assign = self.on_assign
        clients.on_revoke = self.on_revoke

    def forget(self) -> None:
        """The clients are gone: the next consumer's assignment starts afresh."""
        self.paused_until.clear()
        self.to_hydrate.clear()
        self.joined = False
        self.flow.rebalance(assigned=0, total=self.partitions)

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.assign(partitions)
        inputs = [tp for tp in partitions if tp.topic in self.inputs]
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
            self.clients.assign_failed = exc
            return
        behind = []
        for tp in committed:
            checkpoint = self.store.checkpoint(tp.topic, tp.partition)
            if tp.offset > checkpoint:
                self.to_hydrate[(tp.topic, tp.partition)] = tp.offset
                behind.append(TopicPartition(tp.topic, tp.partition))
        if behind:
            consumer.pause(behind)
        self.joined = True
        first = self.inputs[0]
        assigned = sum(1 for tp in partitions if tp.topic == first)
        self.flow.rebalance(assigned=assigned, total=self.partitions)
        self.telemetry.log(
            "rebalance",
            f"assigned {len(partitions)} partition(s), {len(behind)} to hydrate",
            outcome="assigned",
        )
        self.clients.answered()

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.paused_until.pop((tp.topic, tp.partition), None)
            self.to_hydrate.pop((tp.topic, tp.partition), None)
        # The rate share shrinks with the partitions as they go, not at the next
        # assignment: the members that take them over start spending their share then.
        first = self.inputs[0]
        revoked = {tp.partition for tp in partitions if tp.topic == first}
        kept = sum(
            1 for tp in consumer.assignment() if tp.topic == first and tp.partition not in revoked
        )
        self.flow.rebalance(assigned=kept, total=self.partitions)
        self.telemetry.log(
            "rebalance", f"revoked {len(partitions)} partition(s)", outcome="revoked"
        )

    def hydrate_pending(self) -> None:
        """Rebuild the projection of newly assigned partitions up to their committed
        offsets, then let them flow."""
        consumer = self.clients.consumer
        assert consumer is not None
        if not self.to_hydrate:
            return
        targets = dict(self.to_hydrate)
        self.to_hydrate.clear()
        folded = hydrate(
            self.settings, self.store, targets, read_ahead_kb=self.settings.rebuild_read_ahead_kb
        )
        consumer.resume([TopicPartition(t, p) for t, p in targets])
        self.telemetry.log("hydrate", f"folded {folded} event(s) into the projection", outcome="ok")

    def resume_due(self) -> None:
        """Resume the retry partitions whose head has come due."""
        consumer = self.clients.consumer
        assert consumer is not None
        now = self.wall_ms()
        due = [key for key, at in self.paused_until.items() if at <= now]
        if due:
            consumer.resume([TopicPartition(t, p) for t, p in due])
            for key in due:
                del self.paused_until[key]

    def hold_until_due(self, records: list[Message]) -> list[Message]:
        """Drop retry records that are not due yet, pausing their partition until they
        are; later records of that partition wait behind them."""
        consumer = self.clients.consumer
        assert consumer is not None
        retry_topic = self.retry_topic
        facts = []
        for message in records:
            position = RecordPosition.of(message)
            mark = read_mark(headers_of(message)) if position.topic == retry_topic else None
            facts.append((position, mark))
        kept, held = hold_not_due(facts, retry_topic=retry_topic, now_ms=self.wall_ms())
        for (topic, partition), (offset, due_ms) in held.items():
            tp = TopicPartition(topic, partition, offset)
            consumer.pause([tp])
            consumer.seek(tp)
            self.paused_until[(topic, partition)] = due_ms
        if len(kept) == len(records):
            return records
        return [records[i] for i in kept]
