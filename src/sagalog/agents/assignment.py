"""Which partitions an instance reads, and when: assignment, hydration and retry holds.

Each assignment also has the budget claims of the input partitions held read from
the claims topic (``agents.claims``) before any record is handled: a call an
instance made before it died counts in its successor's ledgers.

An input partition assigned with a committed offset ahead of the local checkpoint is
paused until its projection is rebuilt from the log (``hydration``): a handler never
sees a context missing events that were handled before. The rebuild runs before any
record polled with the assignment is handled, whichever partition it came from: a
retry record's context is folded from its *input* partition (the retry topic holds
copies of input events, so it is never hydrated itself and flows at once).

A retry partition whose head is not due is paused until it is
(``triage.hold_not_due``), instead of spinning on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from sagalog.agents.connection import KafkaClients
from sagalog.agents.hydration import hydrate
from sagalog.agents.lane import Lane
from sagalog.agents.records import headers_of
from sagalog.agents.routing import read_mark
from sagalog.agents.telemetry import AgentTelemetry
from sagalog.agents.triage import hold_not_due
from sagalog.position import RecordPosition


class Assignment:
    """The instance's partitions: paused for hydration or for a retry not yet due."""

    def __init__(
        self,
        *,
        clients: KafkaClients,
        lanes: Sequence[Lane],
        partitions: int,
        telemetry: AgentTelemetry,
        wall_ms: Callable[[], int],
    ) -> None:
        """Args:
        lanes: the agents of the process, each with its store open; a lane's first
            input topic counts the partitions its rate limits are shared by.
        partitions: the partitions of each input topic.
        """
        self.clients = clients
        self.settings = clients.settings
        self.lanes = tuple(lanes)
        self.inputs = frozenset(topic for lane in lanes for topic in lane.agent.topics)
        self.retry_topics = frozenset(lane.retry_topic for lane in lanes)
        self.partitions = partitions
        self.telemetry = telemetry
        self.wall_ms = wall_ms
        self.paused_until: dict[tuple[str, int], int] = {}
        self.to_hydrate: dict[tuple[str, int], int] = {}
        self.claims_to_read: frozenset[int] = frozenset()
        """The input partitions whose claims are read before anything is handled."""
        self.joined = False
        """The group assigned this consumer its partitions (none is an assignment too)."""
        clients.on_assign = self.on_assign
        clients.on_revoke = self.on_revoke

    def forget(self) -> None:
        """The clients are gone: the next consumer's assignment starts afresh."""
        self.paused_until.clear()
        self.to_hydrate.clear()
        self.claims_to_read = frozenset()
        self.joined = False
        for lane in self.lanes:
            lane.flow.rebalance(assigned=0, total=self.partitions)
            if lane.store is not None:
                lane.budgets.rebalance((), total=self.partitions)

    def _share_rate_limits(self, held: Sequence[TopicPartition]) -> None:
        """Each lane's rate limits, shared by the partitions of its first input held
        here, and its budgets' ledgers, one per input partition held."""
        for lane in self.lanes:
            first = lane.agent.topics[0]
            assigned = sum(1 for tp in held if tp.topic == first)
            lane.flow.rebalance(assigned=assigned, total=self.partitions)
            if lane.store is not None:
                lane.budgets.rebalance(
                    {tp.partition for tp in held if tp.topic in lane.agent.topics},
                    total=self.partitions,
                )

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.assign(partitions)
        # librdkafka keeps a partition's pause across a rebalance that hands it back to
        # this member, while ``on_revoke`` forgot why it was paused: a retry partition
        # paused until its head came due then stayed paused for good (a thundering-herd
        # round: two of three budget agents stopped at their deferred reservations for
        # ten minutes, the retry records long due). Every partition starts unpaused;
        # those to rebuild are paused again below.
        consumer.resume(partitions)
        inputs = [tp for tp in partitions if tp.topic in self.inputs]
        try:
            committed = (
                consumer.committed(inputs, timeout=self.settings.connect_timeout_s)
                if inputs
                else []
            )
        except KafkaException as exc:
            # Raised inside librdkafka's callback it would leave poll() as a bare
            # KafkaError, which no except clause catches, and the agent would die with
            # exit 1 (docs/design/incident-history.md).
            # Nothing flows unchecked: the partitions stay paused until the clients are
            # built anew (the iteration raises it, the run loop rebuilds).
            consumer.pause(partitions)
            self.clients.assign_failed = exc
            return
        behind = []
        for tp in committed:
            if any(self._behind(lane, tp.topic, tp.partition, tp.offset) for lane in self.lanes):
                self.to_hydrate[(tp.topic, tp.partition)] = tp.offset
                behind.append(TopicPartition(tp.topic, tp.partition))
        if behind:
            consumer.pause(behind)
        # Every assignment, not only of the partitions new here: one held before may
        # have been another's in between. Read from where the last read ended.
        if any(lane.claims_topic is not None for lane in self.lanes):
            self.claims_to_read = frozenset(
                tp.partition for tp in partitions if tp.topic in self.inputs
            )
        self.joined = True
        self._share_rate_limits(partitions)
        self.telemetry.log(
            "rebalance",
            f"assigned {len(partitions)} partition(s), {len(behind)} to hydrate",
            outcome="assigned",
        )
        self.clients.answered()

    @staticmethod
    def _behind(lane: Lane, topic: str, partition: int, offset: int) -> bool:
        """Whether the lane's projection of an input partition ends before ``offset``
        (a retry topic is never rebuilt: it holds copies of input events)."""
        assert lane.store is not None
        if topic not in lane.agent.topics:
            return False
        return offset > lane.store.checkpoint(topic, partition)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.paused_until.pop((tp.topic, tp.partition), None)
            self.to_hydrate.pop((tp.topic, tp.partition), None)
        self.claims_to_read = frozenset()  # the next assignment names its own
        # The rate share shrinks with the partitions as they go, not at the next
        # assignment: the members that take them over start spending their share then.
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        self._share_rate_limits(
            [tp for tp in consumer.assignment() if (tp.topic, tp.partition) not in revoked]
        )
        self.telemetry.log(
            "rebalance", f"revoked {len(partitions)} partition(s)", outcome="revoked"
        )

    def hydrate_pending(self) -> None:
        """Read the claims of newly assigned partitions, and rebuild the projection of
        those behind up to their committed offsets, then let them flow."""
        consumer = self.clients.consumer
        assert consumer is not None
        if self.claims_to_read:
            held = self.claims_to_read
            kept = sum(lane.read_claims(self.settings, held) for lane in self.lanes)
            self.claims_to_read = frozenset()  # read: a failure above reads them again
            self.telemetry.log(
                "claims", f"kept {kept} budget claim(s) of {len(held)} partition(s)", outcome="ok"
            )
        if not self.to_hydrate:
            return
        targets = dict(self.to_hydrate)
        self.to_hydrate.clear()
        folded = 0
        for lane in self.lanes:
            assert lane.store is not None
            behind = {
                (topic, partition): offset
                for (topic, partition), offset in targets.items()
                if self._behind(lane, topic, partition, offset)
            }
            if behind:
                folded += hydrate(
                    self.settings,
                    lane.store,
                    behind,
                    read_ahead_kb=self.settings.rebuild_read_ahead_kb,
                    on_event=lane.fold_spends if lane.agent.budgets else None,
                )
                lane.budgets.invalidate()
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
        retry_topics = self.retry_topics
        facts = []
        for message in records:
            position = RecordPosition.of(message)
            mark = read_mark(headers_of(message)) if position.topic in retry_topics else None
            facts.append((position, mark))
        kept, held = hold_not_due(facts, retry_topics=retry_topics, now_ms=self.wall_ms())
        for (topic, partition), (offset, due_ms) in held.items():
            tp = TopicPartition(topic, partition, offset)
            consumer.pause([tp])
            consumer.seek(tp)
            self.paused_until[(topic, partition)] = due_ms
        if len(kept) == len(records):
            return records
        return [records[i] for i in kept]
