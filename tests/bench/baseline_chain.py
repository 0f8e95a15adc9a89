"""The physical limit for sagas: plain transactional confluent-kafka chains, no sagalog code.

The chain has the sagalog system's shape, record for record and process for process:

- the generator writes each saga's first record to ``chain.<s>.e0`` (``RequestSubmitted``);
- five *hop* processes: hop k consumes ``e<k-1>`` and produces one record to ``e<k>``
  per record (the five agents and their events);
- one *observer* process consumes ``e0`` .. ``e5`` and produces one record per input
  to ``chain.<s>.observed`` (the tracker and its six transitions per saga). Like the
  tracker (faust, not transactional) it waits for the acks of each batch and commits
  its offsets every second; this also keeps ``observed`` free of transaction markers,
  so its watermarks count records.

That is 12 records written per saga, as in sagalog (6 events, 6 transitions). Each
process runs the loop an agent runs around its handler and nothing else:
read_committed consume of whatever is available, produce, ``send_offsets_to_transaction``
and commit, one transaction per batch (``raw_handoff.py`` explains ``retry.backoff.ms``).
A saga completes when the observer's record for its ``e5`` record is written. One
difference is deliberate: each hop reads only its own input, while a sagalog agent
reads every event of the workflow topic (six per saga) to keep its projection; that
is part of what the ratio measures.

``--baseline-shared`` also measures the chain in sagalog's own topology: one topic
(``chain.<s>.events``) holds every record, each hop reads all of it and relays only
the records whose ``ce_type`` header is its input's (the screen a sagalog agent makes
from the headers alone), and the observer reads the one topic. A hop that read nothing
of its own opens no transaction; its position moves with its next one. What that
variant loses against the per-hop chain is the price of the shared topic itself, with
no sagalog code: the broker's fetches and each hop's screening of the others' records.

The relay runs as ``python -m tests.bench.baseline_chain --in ... --out ...``; it
imports nothing from sagalog but the properties every producer on a sagalog cluster
sets (``client_config.PRODUCER_ONLY``; the measurement half of this module imports
the rest, lazily).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, Producer

from .harness import (
    SENT_HEADER,
    GeneratorProducer,
    Headers,
    RecordFactory,
    producer_config,
    take_available,
)

if TYPE_CHECKING:
    from sagalog.settings import ClientSettings

    from .sagas import Marks, Progress, SagaAnalysis, SagaBenchResult, Service

REPO = Path(__file__).resolve().parents[2]
CONFIG_ENV = "BENCH_KAFKA_CONFIG"
SOURCE_HEADER = "chain_src"
TYPE_HEADER = "ce_type"
HOPS = 5
FIRST_TYPE = "procurement.v1.RequestSubmitted"
"""The generator's records' type; hop k of the shared chain emits ``chain.e<k>``."""


def hop_types() -> list[str]:
    """The record type each hop of the shared chain reads: hop k reads ``[k - 1]``."""
    return [FIRST_TYPE, *(f"chain.e{k}" for k in range(1, HOPS + 1))]


def header(headers: list[tuple[str, bytes]], name: str) -> bytes | None:
    return next((value for key, value in headers if key == name), None)


class ChainRelay:
    """consume -> produce -> send offsets -> commit, one transaction per batch.

    With ``transactional=False`` (the observer): consume -> produce -> flush, and a
    plain offset commit at most every ``commit_interval_s``.
    """

    def __init__(
        self,
        kafka_config: Mapping[str, Any],
        *,
        inputs: list[str],
        output: str,
        group_id: str,
        transactional_id: str,
        tag_source: str | None,
        transactional: bool = True,
        handles: str | None = None,
        emits: str | None = None,
        max_batch: int = 500,
        commit_interval_s: float = 1.0,
    ) -> None:
        self.inputs = inputs
        self.output = output
        self.tag_source = tag_source
        self.handles = handles.encode() if handles else None
        self.emits = emits.encode() if emits else None
        self.transactional = transactional
        self.max_batch = max_batch
        self.commit_interval_s = commit_interval_s
        self._committed_at = 0.0
        self._stopping = False
        self.consumer = Consumer(
            {
                **kafka_config,
                "group.id": group_id,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        delivery = (
            {"transactional.id": transactional_id, "retry.backoff.ms": 5} if transactional else {}
        )
        self.producer = Producer(producer_config(kafka_config, **{"linger.ms": 1, **delivery}))

    def stop(self) -> None:
        self._stopping = True

    def run(self) -> None:
        if self.transactional:
            self.producer.init_transactions(30)
        self.consumer.subscribe(self.inputs)
        try:
            while not self._stopping:
                batch = take_available(self.consumer, max_messages=self.max_batch, wait_s=0.1)
                if batch:
                    self._relay(batch)
        finally:
            self.consumer.close()

    def _relay(self, batch: list[Any]) -> None:
        if self.handles is not None:  # the shared topic: relay only our input's records
            batch = [m for m in batch if header(m.headers() or [], TYPE_HEADER) == self.handles]
            if not batch:
                return
        producer = self.producer
        if self.transactional:
            producer.begin_transaction()
        for message in batch:
            headers = message.headers() or []
            if self.emits is not None:
                headers = [(k, self.emits if k == TYPE_HEADER else v) for k, v in headers]
            if self.tag_source == "type":
                headers.append((SOURCE_HEADER, header(headers, TYPE_HEADER) or b""))
            elif self.tag_source == "topic":
                headers.append((SOURCE_HEADER, message.topic()))
            producer.produce(self.output, message.value(), message.key(), headers=headers)
        if not self.transactional:
            if producer.flush(60):
                raise RuntimeError("records unacknowledged after 60 s")
            now = time.monotonic()
            if now - self._committed_at >= self.commit_interval_s:
                self.consumer.commit(asynchronous=True)
                self._committed_at = now
            return
        positions = [
            tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0
        ]
        producer.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(), 30)
        while True:
            try:
                producer.commit_transaction(30)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise  # a benchmark fails loudly; rewinding is the agents' business


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in", dest="inputs", required=True, help="comma-separated topics")
    parser.add_argument("--out", required=True)
    parser.add_argument("--group-id", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument(
        "--tag-source", choices=["topic", "type"], help="add a header naming the record's source"
    )
    parser.add_argument("--handles", help="the shared topic: relay only records of this ce_type")
    parser.add_argument("--emits", help="the shared topic: the ce_type of what is relayed")
    parser.add_argument(
        "--no-transactions", action="store_true", help="flush per batch, commit every second"
    )
    args = parser.parse_args(argv)
    config = json.loads(os.environ.get(CONFIG_ENV, '{"bootstrap.servers": "127.0.0.1:9092"}'))
    relay = ChainRelay(
        config,
        inputs=args.inputs.split(","),
        output=args.out,
        group_id=args.group_id,
        transactional_id=args.transactional_id,
        tag_source=args.tag_source,
        transactional=not args.no_transactions,
        handles=args.handles,
        emits=args.emits,
    )

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        relay.stop()

    signal.signal(signal.SIGTERM, on_term)
    relay.run()


# --- the measurement (imports sagalog through .sagas) -------------------------------------


def chain_records(tag: str, *, value_size: int = 200) -> RecordFactory:
    """Opaque records the size of a sagalog ``RequestSubmitted`` with its CloudEvents headers."""
    value = random.Random(7).randbytes(value_size)
    static: Headers = [
        ("ce_specversion", b"1.0"),
        (TYPE_HEADER, FIRST_TYPE.encode()),
        ("ce_source", b"bench/load"),
        ("ce_time", b"2027-01-15T08:00:00.000000+00:00"),
        ("content-type", b"application/avro"),
    ]

    def record(i: int) -> tuple[bytes, bytes, Headers]:
        saga = f"{tag}-{i:07d}"
        return (
            saga.encode(),
            value,
            [("ce_id", str(uuid.uuid4()).encode()), ("ce_workflowid", saga.encode()), *static],
        )

    return record


class ChainSystem:
    """The chain's topics and its six relay processes (see the module docstring);
    ``shared``: one topic for every record, as sagalog's workflow topic."""

    per_saga = HOPS + 1

    def __init__(
        self, settings: ClientSettings, scratch: Path, *, partitions: int, shared: bool = False
    ) -> None:
        self.suffix = f"chainbench{uuid.uuid4().hex[:10]}"
        self.name = "baseline-shared" if shared else "baseline"
        self.shared = shared
        self.settings = settings
        self.kafka_config = settings.kafka_config()
        self.scratch = scratch
        self.partitions = partitions
        if shared:
            self.topics = [f"chain.{self.suffix}.events"]
        else:
            self.topics = [f"chain.{self.suffix}.e{k}" for k in range(HOPS + 1)]
        self.input_topic = self.topics[0]
        self.completion_topic = f"chain.{self.suffix}.observed"
        self.last_source = hop_types()[-1] if shared else self.topics[-1]
        """The observer's source header on a saga's completion."""
        self.services: dict[str, Service] = {}
        self._reader: Consumer | None = None
        self._generator = GeneratorProducer(self.kafka_config)

    def setup(self) -> ChainSystem:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(self.kafka_config)
        topics = [NewTopic(t, self.partitions) for t in [*self.topics, self.completion_topic]]
        for future in admin.create_topics(topics).values():
            future.result(30)
        deadline = time.monotonic() + 60
        while True:  # a new partition answers NOT_LEADER_FOR_PARTITION for a moment
            try:
                self.marks([*self.topics, self.completion_topic])
                return self
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def start(self) -> None:
        from .sagas import Service, service_env

        env = service_env({CONFIG_ENV: json.dumps(self.kafka_config)})
        types = hop_types()
        jobs: dict[str, tuple[str, ...]] = {}
        for k in range(1, HOPS + 1):
            if self.shared:
                jobs[f"hop{k}"] = (
                    f"--in={self.input_topic}",
                    f"--out={self.input_topic}",
                    f"--handles={types[k - 1]}",
                    f"--emits={types[k]}",
                )
            else:
                jobs[f"hop{k}"] = (f"--in={self.topics[k - 1]}", f"--out={self.topics[k]}")
        jobs["observer"] = (
            f"--in={','.join(self.topics)}",
            f"--out={self.completion_topic}",
            f"--tag-source={'type' if self.shared else 'topic'}",
            "--no-transactions",
        )
        for name, args in jobs.items():
            self.services[name] = Service(
                name=name,
                env=env,
                log=self.scratch / f"{name}.log",
                module="tests.bench.baseline_chain",
                args=(
                    *args,
                    f"--group-id=chain-{name}-{self.suffix}",
                    f"--transactional-id=chain-{name}-{self.suffix}",
                ),
            ).start()

    def records(self, tag: str) -> RecordFactory:
        return chain_records(tag)

    def generator(self) -> Producer:
        return self._generator.get()

    def marks(self, topics: list[str] | None = None) -> Marks:
        from .sagas import watermarks

        if self._reader is None:
            self._reader = Consumer(
                {**self.kafka_config, "group.id": f"bench-reader-{self.suffix}"}
            )
        return watermarks(self._reader, topics or [self.completion_topic])

    def pids(self) -> dict[str, int]:
        return {name: service.pid for name, service in self.services.items() if service.alive}

    def check_alive(self, doing: str) -> None:
        for service in self.services.values():
            service.check_alive(doing)

    def analyze(self, before: Marks, after: Marks, *, detail: bool) -> SagaAnalysis:
        from .sagas import SagaAnalysis, header_values, read_range

        analysis = SagaAnalysis()
        last = self.last_source
        names = frozenset({SOURCE_HEADER, SENT_HEADER})
        for message in read_range(
            self.kafka_config,
            self.completion_topic,
            before[self.completion_topic],
            after[self.completion_topic],
            group=f"bench-reader-{self.suffix}",
        ):
            headers = header_values(message, names)
            saga = (message.key() or b"").decode()
            if SENT_HEADER in headers:
                analysis.sent_ns.setdefault(saga, int(headers[SENT_HEADER]))
            if headers.get(SOURCE_HEADER) == last:
                analysis.done_ms[saga] = message.timestamp()[1]
        return analysis

    def close(self) -> list[str]:
        from .sagas import delete_suffixed, stop_all

        problems: list[str] = []
        stop_all(self.services.values(), problems)
        self._generator.close()
        if self._reader is not None:
            self._reader.close()
        return problems + delete_suffixed(self.settings, self.suffix)


def measure_baseline(
    settings: ClientSettings,
    scratch: Path,
    *,
    partitions: int,
    duration_s: float,
    probe_s: float,
    start_rate: float,
    progress: Progress,
    shared: bool = False,
) -> SagaBenchResult:
    """``baseline_sagas_per_s`` (``baseline_shared_sagas_per_s`` for the chain on one
    shared topic): the same search and confirmation as sagalog's."""
    from .sagas import (
        MaxRate,
        SagaBenchResult,
        broker_text,
        confirm_rate,
        cpu_per_saga_text,
        cpu_text,
        find_max_rate,
        warm_up,
    )

    prefix = "baseline_shared" if shared else "baseline"
    label = "baseline on one shared topic" if shared else "baseline"
    scratch.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {f"{prefix}_sagas_per_s": None}
    rows: list[tuple[str, str]] = []
    system = ChainSystem(settings, scratch, partitions=partitions, shared=shared)
    try:
        system.setup()
        system.start()
        warm_up(system, progress=progress)
        rate, probes = find_max_rate(
            system,
            start_rate=start_rate,
            probe_s=probe_s,
            probes=8,
            cap=50_000,
            progress=progress,
        )
        if rate is None:
            raise RuntimeError(f"not even {start_rate:g} sagas/s was sustained")
        chosen, runs, confirmed = confirm_rate(
            system, rate, duration_s=duration_s, progress=progress
        )
        found = MaxRate(chosen, [*probes, *runs], confirmed)
        results |= found.as_dict(f"{prefix}_sagas")
        if confirmed is None:
            rows.append((f"{label} sagas/s", f"FAILED: no {duration_s:g}s run was sustained"))
        else:
            rows.append(
                (
                    f"{label} sagas/s (sustained)",
                    f"{confirmed.steady_per_s:,.1f} completed/s for {duration_s:g}s, e2e p50 "
                    f"{confirmed.e2e.p50_ms:,.0f} / p99 {confirmed.e2e.p99_ms:,.0f} ms",
                )
            )
            rows.append(("  CPU meanwhile", cpu_text(confirmed)))
            rows.append(("  CPU per saga", cpu_per_saga_text(confirmed)))
            rows.append(("  broker per saga", broker_text(confirmed)))
    except Exception as exc:
        results[f"{prefix}_error"] = str(exc)
        rows.append((f"{label} sagas/s", f"FAILED: {str(exc).splitlines()[0]}"))
        progress(f"{label} FAILED: {exc}")
    finally:
        for problem in system.close():
            progress(f"{system.suffix}: cleanup: {problem}")
    return SagaBenchResult(results, rows)


if __name__ == "__main__":
    main()
