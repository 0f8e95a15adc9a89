"""The tracker's decision path alone, in memory: microseconds per event, and where they go.

The live tracker's figure (``tracker_events_per_s``) mixes faust, aiokafka,
librdkafka and RocksDB with our own code, on a noisy shared machine. This isolates
``sagalog.tracker.processor`` (decide, seal, overlay, write back) over
``MemoryTables`` and a sink that only counts: the part a redesign of the consumer
loop would keep, and the part to optimise first. ``--profile`` prints cProfile's
top functions by own time.

    python -m tests.bench.processor --workflows 5000 [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as dt
import hashlib
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.headers import EventHeaders
from sagalog.flows.loader import load_flows
from sagalog.flows.registry import FlowRegistry
from sagalog.memory import tune_collector
from sagalog.services.tracker.settings import TrackerSettings
from sagalog.topology.loader import load_topology
from sagalog.tracker import Alert, Publish, TrackedEvent
from sagalog.tracker.processor import Processor
from sagalog.tracker.record import SealedEvent
from sagalog.tracker.tables import MemoryTables

REPO = Path(__file__).resolve().parents[2]
FLOW = REPO / "tests" / "integration" / "flows" / "orders.v1.yaml"
TOPIC = "orders.events.bench"
# Up to the gate: the start and the first three steps' completions.
EVENTS = (
    "procurement.v1.RequestSubmitted",
    "procurement.v1.BudgetReserved",
    "procurement.v1.RequestClassified",
    "procurement.v1.PoliciesRetrieved",
)
SCHEMAS = (
    *EVENTS,
    "procurement.v1.RiskScored",
    "procurement.v1.PurchaseOrderCreated",
    "procurement.v1.BudgetReleased",
    "procurement.v1.PurchaseOrderCancelled",
    "sagalog.v1.StepFailed",
    "sagalog.v1.GateOpened",
    "sagalog.v1.GateDecided",
    "sagalog.v1.CompensationRequested",
    "sagalog.v1.CompensationCompleted",
)
T0 = 1_700_000_000_000


class CountingSink:
    def __init__(self) -> None:
        self.published = 0

    def publish(self, action: Publish, *, partition: int) -> None:
        self.published += 1

    def alert(self, alert: Alert, *, flow: Any, now_ms: int, partition: int) -> None:
        pass

    async def flush(self) -> None:
        pass


def registry(folder: Path) -> FlowRegistry:
    catalog = SchemaCatalog.load(REPO / "schemas")
    (folder / "flows").mkdir(parents=True)
    schemas = "".join(f"      - {name}\n" for name in SCHEMAS)
    (folder / "topics.yaml").write_text(f"topics:\n  {TOPIC}:\n    schemas:\n{schemas}")
    text = FLOW.read_text().replace("{s}", TOPIC.rsplit(".", 1)[1])
    (folder / "flows" / "orders.v1.yaml").write_text(text)
    topology = load_topology(folder, known_schemas=catalog)
    return load_flows(folder / "flows", catalog=catalog, topology=topology)


def inputs(workflows: int) -> list[tuple[TrackedEvent, SealedEvent]]:
    """Each workflow's events in turn, as batches interleave them on one partition."""
    made = []
    offset = 0
    for step, event_type in enumerate(EVENTS):
        for n in range(workflows):
            workflow_id = f"wf-{n}"
            headers = EventHeaders(
                id=f"{workflow_id}-{step}",
                type=event_type,
                source="bench",
                workflow_id=workflow_id,
                time=dt.datetime.fromtimestamp((T0 + step * 1000) / 1000, dt.UTC),
                # as an agent's output carries it: the workflow's trace, a span per event
                traceparent=f"00-{n + 1:032x}-{offset + 1:016x}-01",
            )
            sealed = SealedEvent(
                topic=TOPIC,
                partition=0,
                offset=offset,
                event_id=headers.id,
                hash=hashlib.sha256(headers.id.encode()).hexdigest(),
            )
            made.append((TrackedEvent.from_headers(headers, {}), sealed))
            offset += 1
    return made


def run(workflows: int, batch_size: int, profile: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        flows = registry(Path(scratch))
    events = inputs(workflows)
    # As the service runs: the collector tuned once it is ready.
    tune_collector(TrackerSettings.model_fields["gc_young_threshold"].default)
    sink = CountingSink()
    processor = Processor(registry=flows, secret=b"x" * 32, partitions=1, sink=sink)
    tables = MemoryTables()
    # CPU time, not wall time: on a shared machine the wall clock charges whatever
    # function was running when the process was descheduled.
    profiler = cProfile.Profile(time.process_time) if profile else None
    started, cpu_started = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    for first in range(0, len(events), batch_size):
        batch = processor.begin(tables)
        for event, sealed in events[first : first + batch_size]:
            processor.handle(batch, 0, event, now_ms=T0 + 5000, topic=TOPIC, sealed=sealed)
        asyncio.run(processor.commit(batch))
    if profiler is not None:
        profiler.disable()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return {
        "processor_events": len(events),
        "processor_us_per_event": round(elapsed / len(events) * 1e6, 1),
        # CPU time moves far less than wall time on a shared machine.
        "processor_cpu_us_per_event": round(cpu / len(events) * 1e6, 1),
        "processor_events_per_s": round(len(events) / elapsed),
        "processor_published": sink.published,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workflows", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(run(args.workflows, args.batch_size, args.profile))


if __name__ == "__main__":
    main()
