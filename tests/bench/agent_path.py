"""An agent's per-event path alone, without Kafka: CPU microseconds per event.

The live figure (the sustained saga benchmark, sampled by py-spy) mixes librdkafka,
the broker and the schema registry with our own code on a shared machine. This runs
the worker's own batch path (``AgentWorker._process``: classify, fold into the
RocksDB projection, deduplicate, handle, encode and sign the outputs, the
transaction's calls, checkpoint, accounting) over records built in memory, with a
producer and a consumer that only count and a registry that knows the schema ids
already. The store is a real RocksDB in a temporary directory.

The agent is step 3 of the ``benchsaga`` relay chain (it handles
``PoliciesRetrieved``) on a topic carrying all six events of each saga, as in the
sustained benchmark: it folds six events per saga to handle one of them. Inputs
arrive step by step across ``--workflows`` workflows, as batches interleave them on
one partition. The projection keeps what the flow names (all six), as in the
sustained benchmark. ``--profile`` prints cProfile's top functions by own time.

    python -m tests.bench.agent_path --workflows 5000 [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import decimal
import gc
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from procurement.events import (
    BudgetReserved,
    PoliciesRetrieved,
    PurchaseOrderCreated,
    RequestClassified,
    RequestSubmitted,
    RiskLevel,
    RiskScored,
)
from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent
from sagalog.agents.lineage import DecisionLineage
from sagalog.agents.settings import AgentSettings
from sagalog.agents.state_store import StateStore
from sagalog.agents.telemetry import configure_logging
from sagalog.agents.worker import AgentWorker
from sagalog.contracts.catalog import EventSchema, SchemaCatalog
from sagalog.contracts.hash_chain import signed
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.models import Event
from sagalog.tracing import configure_tracing

from .saga_agents import chain_flow

REPO = Path(__file__).resolve().parents[2]
TOPIC = "benchsaga.events.path"
T0 = dt.datetime(2027, 1, 15, 8, tzinfo=dt.UTC)
AMOUNT = decimal.Decimal("100.00")
LINEAGE = DecisionLineage(model_id="bench", prompt_hash="sha256:0", input_refs=[], decided_at=T0)
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def saga_events(workflow_id: str) -> list[Event]:
    """The six events of one ``benchsaga`` saga, in log order."""
    return [
        RequestSubmitted(
            request_id=workflow_id,
            requester="bench@example.com",
            department="engineering",
            title="Laptops",
            description="three laptops for the new team",
            amount=AMOUNT,
            currency="EUR",
            vendor="Acme",
            submitted_at=T0,
        ),
        RequestClassified(
            request_id=workflow_id,
            category="hardware",
            confidence=0.9,
            extracted={},
            classifier="bench-relay",
        ),
        PoliciesRetrieved(request_id=workflow_id, documents=[], retriever="bench-relay"),
        RiskScored(
            request_id=workflow_id,
            score=0.2,
            level=RiskLevel.LOW,
            rationale="bench relay",
            factors=[],
            lineage=LINEAGE,
        ),
        BudgetReserved(
            reservation_id=f"R-{workflow_id}", cost_center="CC-BENCH", amount=AMOUNT, currency="EUR"
        ),
        PurchaseOrderCreated(
            purchase_order_id=f"PO-{workflow_id}",
            request_id=workflow_id,
            vendor="Acme",
            amount=AMOUNT,
            currency="EUR",
        ),
    ]


class GcTimer:
    """Time spent in the cyclic garbage collector (``gc.callbacks``), by generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1


class KnownIds:
    """A schema registry that already knows every schema: one id per event type."""

    def __init__(self, catalog: SchemaCatalog) -> None:
        self.by_type = {name: n + 1 for n, name in enumerate(sorted(catalog))}
        self.by_id = {n: catalog[name].definition for name, n in self.by_type.items()}

    def schema_id(self, subject: str, schema: EventSchema) -> int:
        return self.by_type[schema.name]

    def writer_schema(self, schema_id: int) -> Any:
        return self.by_id[schema_id]


class Record:
    """A consumed record, shaped like ``confluent_kafka.Message``."""

    __slots__ = ("_headers", "_key", "_offset", "_value")

    def __init__(self, key: bytes, value: bytes, headers: list[Any], offset: int) -> None:
        self._key, self._value, self._headers, self._offset = key, value, headers, offset

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list[Any]:
        return self._headers

    def error(self) -> None:
        return None


class CountingProducer:
    """The transactional producer's calls, counted."""

    def __init__(self) -> None:
        self.produced = 0
        self.transactions = 0

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, *, key: Any, value: Any, headers: Any, **_: Any) -> None:
        self.produced += 1

    def send_offsets_to_transaction(self, positions: Any, metadata: Any, timeout: float) -> None:
        pass

    def commit_transaction(self, timeout: float) -> None:
        self.transactions += 1


class OnePartition:
    """The consumer's calls the transaction makes."""

    def assignment(self) -> list[Any]:
        return []

    def position(self, partitions: list[Any]) -> list[Any]:
        return []

    def consumer_group_metadata(self) -> object:
        return object()


def agent() -> Agent:
    relay = Agent("bench-path-score")  # step "score" of FLOW

    @relay.handles(step="score")
    async def score(event: PoliciesRetrieved, ctx: HandlerContext) -> RiskScored:
        return RiskScored(
            request_id=ctx.workflow_id,
            score=0.2,
            level=RiskLevel.LOW,
            rationale="bench relay",
            factors=[],
            lineage=LINEAGE,
        )

    return relay


def records(worker: AgentWorker, workflows: int) -> list[Record]:
    """Each workflow's events in turn, as batches interleave them on one partition."""
    sagas = [(f"wf-{n:06d}", saga_events(f"wf-{n:06d}")) for n in range(workflows)]
    made: list[Record] = []
    for step in range(6):
        for workflow_id, events in sagas:
            event = events[step]
            headers = EventHeaders(
                id=f"{workflow_id}-{step}",
                type=event.event_type,
                source="sagalog/bench",
                workflow_id=workflow_id,
                time=T0,
                traceparent=TRACEPARENT,
            )
            key = workflow_id.encode()
            value = worker.codec.encode(TOPIC, event.event_type, event.to_avro())
            made.append(Record(key, value, signed(key, value, headers.to_kafka()), len(made)))
    return made


def run(
    workflows: int,
    batch_size: int,
    profile: bool,
    *,
    tracing: bool = True,
) -> dict[str, float]:
    catalog = SchemaCatalog.load(REPO / "schemas")
    with tempfile.TemporaryDirectory() as scratch:
        settings = AgentSettings(
            instance_id="bench",
            data_dir=Path(scratch),
            log_level="WARNING",  # as the sustained benchmark runs its agents
            tracing=tracing,
            max_batch=batch_size,
        )
        flow = chain_flow("benchsaga", TOPIC, {"score": "bench-path-score"})
        worker = AgentWorker(agent(), settings, catalog=catalog, flows=[flow])
        worker.codec.registry = KnownIds(catalog)  # type: ignore[assignment]
        configure_logging(json_lines=True, level=settings.log_level)
        configure_tracing("bench")  # as ``AgentWorker.run`` does: no exporter unless OTEL_*
        producer = CountingProducer()
        worker.clients.producer = producer  # type: ignore[assignment]
        worker.clients.consumer = OnePartition()  # type: ignore[assignment]
        worker.store = store = StateStore(
            settings.data_dir / "store", folded_types=worker.agent.folded_types()
        )
        inputs = records(worker, workflows)
        # The live worker frees each batch's records; kept here for the whole run, they
        # would make every full collection walk them. Moved out of the collector's sight.
        gc.collect()
        gc.freeze()
        # CPU time, not wall time: on a shared machine the wall clock charges whatever
        # function was running when the process was descheduled.
        profiler = cProfile.Profile(time.process_time) if profile else None
        gc_timer = GcTimer()
        gc.callbacks.append(gc_timer)
        started, cpu_started = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        for first in range(0, len(inputs), batch_size):
            worker._process(inputs[first : first + batch_size])  # type: ignore[arg-type]
        if profiler is not None:
            profiler.disable()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        gc.callbacks.remove(gc_timer)
        gc.unfreeze()
        store.close()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    stats = worker.stats
    assert stats.handled == workflows and producer.produced == workflows, stats
    return {
        "agent_path_events": len(inputs),
        "agent_path_handled": stats.handled,
        "agent_path_us_per_event": round(elapsed / len(inputs) * 1e6, 1),
        # CPU time moves far less than wall time on a shared machine.
        "agent_path_cpu_us_per_event": round(cpu / len(inputs) * 1e6, 1),
        "agent_path_cpu_us_per_handled": round(cpu / stats.handled * 1e6, 1),
        # Part of the above: the cyclic collector walking what the run keeps alive.
        "agent_path_gc_us_per_event": round(gc_timer.seconds / len(inputs) * 1e6, 1),
        "agent_path_gc_collections": gc_timer.collections,  # type: ignore[dict-item]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workflows", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--no-tracing", action="store_true", help="settings.tracing off")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(
        run(
            args.workflows,
            args.batch_size,
            args.profile,
            tracing=not args.no_tracing,
        )
    )


if __name__ == "__main__":
    main()
