"""The agents of a whole flow in memory: each the worker's own ``Lane``, fed from the
``MemoryLog`` as the worker feeds it from Kafka.

A lane's batch runs as the worker runs it (``worker.AgentWorker._process_batch``):
the triage takes the records (folding them into the projection), the handlers run,
the records its transaction would produce go to the log, and the bookkeeping after
the commit (parking, checkpoints, counters) follows. The retry topic is read as the
worker reads it: a record not due yet holds the records behind it
(``triage.hold_not_due``). Each agent's RocksDB state lives in a folder of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from sagalog.agents.binding import bind
from sagalog.agents.context import Perform
from sagalog.agents.declaration import Agent
from sagalog.agents.lane import Lane
from sagalog.agents.records import Delivered
from sagalog.agents.routing import read_mark
from sagalog.agents.settings import AgentSettings
from sagalog.agents.triage import hold_not_due
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.errors import ConfigurationError
from sagalog.flows.registry import FlowRegistry
from sagalog.position import RecordPosition
from sagalog.testing.memory_log import LogRecord, MemoryLog


class MemoryAgents:
    """The agents, each checked against the flows and the catalog as at its start.

    Args:
        clock_ms: the environment's clock; the lanes read it as their wall clock
            and (in seconds) as their monotonic one.
        perform: stands in for the effects' calls (``HandlerContext.perform``).
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        *,
        flows: FlowRegistry,
        catalog: SchemaCatalog,
        codec: EventCodec,
        log: MemoryLog,
        settings: AgentSettings,
        perform: Perform,
        clock_ms: Callable[[], int],
        data_dir: Path,
    ) -> None:
        names = [agent.name for agent in agents]
        if len(set(names)) < len(names):
            raise ConfigurationError(f"an agent is named twice among {names}: names must differ")
        self.log = log
        self.clock_ms = clock_ms
        self.loop = asyncio.new_event_loop()
        self.lanes: list[Lane] = []
        for declared in agents:
            agent = bind(declared, flows)
            agent.check(catalog)
            lane = Lane(
                agent,
                settings,
                codec=codec,
                instance="memory",
                clock=lambda: clock_ms() / 1000,
                wall_ms=clock_ms,
                give_up=lambda: False,
                perform=perform,
            )
            lane.open_store(data_dir, "memory")
            self.lanes.append(lane)

    def close(self) -> None:
        for lane in self.lanes:
            if lane.store is not None:
                lane.store.close()
        self.loop.close()

    def run(self) -> bool:
        """One batch of each agent that has records to take; whether any had."""
        ran = False
        for lane in self.lanes:
            ran = self._batch(lane) or ran
        return ran

    def next_retry_ms(self) -> int | None:
        """When the earliest retry record at the head of an agent's retry topic is due
        (None when no agent has one)."""
        due = []
        for lane in self.lanes:
            pending = self.log.pending(lane.name, lane.retry_topic)
            if pending:
                mark = read_mark(pending[0].headers())
                due.append(0 if mark is None else mark.not_before_ms)
        return max(min(due), self.clock_ms()) if due else None

    def _batch(self, lane: Lane) -> bool:
        messages: list[LogRecord] = []
        for topic in lane.agent.topics:
            messages.extend(self.log.consume(lane.name, topic))
        messages.extend(self._due_retries(lane))
        if not messages:
            return False
        records = [Delivered.of(m) for m in messages]
        items, results = lane.take(records)
        handled = (self.loop.run_until_complete(lane.runner.run(items)) if items else None) or []
        lane.park(handled)
        results.extend((item.message, result) for item, result in handled)
        for _, result in results:  # the transaction's records
            for topic, key, value, headers in result.records:
                self.log.append(topic, key, value, headers)
        lane.committed(records, handled, results)
        assert lane.store is not None
        lane.store.flush()
        return True

    def _due_retries(self, lane: Lane) -> list[LogRecord]:
        pending = self.log.pending(lane.name, lane.retry_topic)
        if not pending:
            return []
        marks = [(RecordPosition.of(r), read_mark(r.headers())) for r in pending]
        kept, _ = hold_not_due(marks, retry_topics={lane.retry_topic}, now_ms=self.clock_ms())
        return self.log.consume(lane.name, lane.retry_topic, len(kept))
