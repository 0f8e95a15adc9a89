"""One agent's own part of a worker process: what it handles, how, and what it keeps.

A worker process runs one agent (``sagalog run agent``) or several side by side
(``sagalog run agents``). Everything that makes an agent what it is stays its own
when it shares a process: its handlers, its settings (retries, breakers, rate
limits, handlers in flight, dead-letter topic), its projection and effect ledger, its
retry topic and its counters. That part is a lane. What the lanes of one process
share is the traffic (``worker``): one consumer reads each topic once for all of
them, and one producer commits one transaction per batch for all of them. Five
agents reading one events topic, each alone, fetch every record five times and
commit five transactions where one does.

A lane sees exactly the records it would see alone (its input topics and its own
retry topic) and decides on them with the same code, so its outputs are the same
alone or co-hosted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagalog.agents.accounting import account, after_commit, park_before_commit
from sagalog.agents.binding import BoundAgent
from sagalog.agents.circuit_breaker import BreakerPolicy, BreakerState
from sagalog.agents.context import Perform
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.handling import HandlerRunner, Work
from sagalog.agents.intake import Intake
from sagalog.agents.outputs import RecordBuilder, Result
from sagalog.agents.records import Delivered
from sagalog.agents.settings import AgentSettings
from sagalog.agents.state_store import StateStore
from sagalog.agents.telemetry import AgentTelemetry
from sagalog.backoff import RetryPolicy
from sagalog.budgets.book import BudgetBook, claim_of
from sagalog.budgets.claims import ClaimNote
from sagalog.budgets.ledger import held_from_ms
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.errors import SagalogError
from sagalog.events import EffectRecorded
from sagalog.position import RecordPosition
from sagalog.settings import ClientSettings
from sagalog.streams.record import StreamRecord
from sagalog.topic_names import claims_topic_for, retry_topic_for

if TYPE_CHECKING:
    from sagalog.agents.claims import ClaimsLog
    from sagalog.agents.streaming import StreamWriter  # a Kafka producer: a lane in memory has none

EFFECT_RECORDED = EffectRecorded.event_type


class Lane:
    """One agent in a worker: its decisions, its state and its counts.

    Args:
        agent: the declaration (handlers, input topics, folded types).
        settings: the agent's own settings; its handler limits, retry policy,
            breakers, rate limits and dead-letter topic are read from them.
        codec: the process's codec (one schema registry client for every lane).
        instance: the process's instance id, in the lane's log lines and spans.
        give_up: whether the process's shutdown budget is spent.
        perform: stands in for effects' calls (``sagalog.testing``); None in production.
    """

    def __init__(
        self,
        agent: BoundAgent,
        settings: AgentSettings,
        *,
        codec: EventCodec,
        instance: str,
        clock: Callable[[], float],
        wall_ms: Callable[[], int],
        give_up: Callable[[], bool],
        perform: Perform | None = None,
    ) -> None:
        self.agent = agent
        self.perform = perform
        self.settings = settings
        self.clock = clock
        self.wall_ms = wall_ms
        self.give_up = give_up
        self.retry_topic = retry_topic_for(agent.name)
        self.topics = frozenset([*agent.topics, self.retry_topic])
        """What this lane reads: its inputs and its retry topic."""
        self.claims_topic = claims_topic_for(agent.name) if agent.budgets else None
        """Where its model calls' claims go before the calls (an agent with budgets)."""
        self.claims: ClaimsLog | None = None
        self.streams: StreamWriter | None = None
        """Publishes ``ctx.model_stream`` deltas (set with ``claims``: streaming is
        for model calls, which need budgets)."""
        """The process's writer of claims, once it runs on a broker."""
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
        self.telemetry = AgentTelemetry(agent=agent.name, instance=instance)
        self.flow.on_breaker_change = self._breaker_changed
        self.builder = RecordBuilder(
            agent=agent.name,
            output_topic=agent.output_topic,
            retry_topic=self.retry_topic,
            deadletter_topic=settings.deadletter_topic,
            codec=codec,
            telemetry=self.telemetry,
            wall_ms=wall_ms,
            blobs=settings.blob_store(),
            blob_threshold=settings.blob_threshold_bytes,
        )
        self.codec = codec
        self._store: StateStore | None = None

    @property
    def name(self) -> str:
        return self.agent.name

    @property
    def store(self) -> StateStore | None:
        """The lane's local state; attaching one builds what reads it."""
        return self._store

    @store.setter
    def store(self, store: StateStore) -> None:
        self._store = store
        self.budgets = BudgetBook(self.agent.budgets, store.spends)
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
            give_up=self.give_up,
            budgets=self.budgets,
            budget_policies=self.agent.budget_policies,
            perform=self.perform,
            write_claim=self._write_claim if self.claims_topic is not None else None,
            write_stream=self._write_stream if self.claims_topic is not None else None,
        )

    def open_store(self, data_dir: Path, instance_id: str) -> StateStore:
        """Open the lane's store where it lives when the agent runs alone."""
        store = StateStore(
            data_dir / self.agent.name / instance_id, folded_types=self.agent.folded_types()
        )
        self.store = store
        return store

    def fold_spends(self, headers: EventHeaders, body: bytes | None, at: RecordPosition) -> None:
        """Keep the budget claims of this agent's ``EffectRecorded`` read while a
        partition is rebuilt: they count in the ledgers of the instance that holds
        the partition now."""
        if headers.type != EFFECT_RECORDED or headers.source != self.builder.source:
            return
        assert self._store is not None
        try:
            recorded = EffectRecorded.from_avro(self.codec.decode(body).payload)
        except SagalogError:
            return  # the live path dead-lettered what does not decode
        for logged in recorded.spends or ():
            self._store.keep_spend(at.topic, at.partition, claim_of(logged))

    async def _write_claim(self, note: ClaimNote) -> None:
        if self.claims is not None and self.claims_topic is not None:
            await self.claims.write(self.claims_topic, note)

    def _write_stream(self, topic: str, partition: int, record: StreamRecord) -> None:
        if self.streams is not None:
            self.streams.write(topic, partition, record)

    def read_claims(self, settings: ClientSettings, partitions: frozenset[int]) -> int:
        """Keep the claims of the input partitions numbered ``partitions`` written to
        the claims topic by whoever held them (a dead instance's calls among them),
        for the ledgers to count until their windows pass; how many were kept."""
        if self.claims_topic is None or self._store is None or not partitions:
            return 0
        # Imported here, on a broker: a lane run in memory (``sagalog.testing``) loads
        # no Kafka client.
        from sagalog.agents.claims import read_claims

        kept = read_claims(
            settings,
            self._store,
            topic=self.claims_topic,
            partitions=partitions,
            from_ms=held_from_ms(self.wall_ms()),
        )
        self.budgets.invalidate()
        return kept

    # -- one batch ------------------------------------------------------------------

    def take(self, records: Iterable[Delivered]) -> tuple[list[Work], list[tuple[Any, Result]]]:
        """The lane's records of a batch, through its triage: the work for its handlers,
        and the records already decided (skipped, duplicates, dead letters, parked)."""
        items: list[Work] = []
        results: list[tuple[Any, Result]] = []
        for record in records:
            taken = self.intake.take(record)
            if isinstance(taken, Work):
                items.append(taken)
            else:
                results.append((record.message, taken))
        return items, results

    def park(self, handled: Iterable[tuple[Work, Result]]) -> None:
        assert self._store is not None
        park_before_commit(self._store, handled)

    def committed(
        self,
        records: Iterable[Delivered],
        handled: Iterable[tuple[Work, Result]],
        results: Iterable[tuple[Any, Result]],
    ) -> None:
        """The batch's transaction committed: move the checkpoints, release parkings,
        count and log each record's outcome."""
        assert self._store is not None
        after_commit(
            self._store,
            (record.position for record in records),
            handled,
            retry_topic=self.retry_topic,
        )
        for message, result in results:
            account(self.telemetry, message, result)

    def _breaker_changed(self, dependency: str, before: BreakerState, after: BreakerState) -> None:
        self.telemetry.log(
            "breaker",
            f"circuit breaker of '{dependency}' {before} -> {after}",
            transition=f"{before}->{after}",
            outcome=str(after),
        )
