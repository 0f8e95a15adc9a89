"""What every benchmark shares: the machine, open-loop load, latency percentiles, results.

Latency is measured from the moment a record was *meant* to be published, stamped in
its ``bench_sent_ns`` header by :class:`OpenLoopLoad`. Arrivals follow a fixed timeline
and never wait for the system under test, so a stall shows up as latency instead of
silently lowering the offered load (the "coordinated omission" trap).

Nothing here imports sagalog: the raw baseline must run without it.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import random
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Message, Producer

from sagalog.client_config import PRODUCER_ONLY

SENT_HEADER = "bench_sent_ns"
"""Header holding the intended publish time, ``time.time_ns()`` as ASCII digits."""

Headers = list[tuple[str, str | bytes | None]]
RecordFactory = Callable[[int], tuple[bytes, bytes, Headers]]
"""Builds record number ``i`` as ``(key, value, headers)``; the load adds ``SENT_HEADER``."""


def producer_config(kafka_config: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """A producer's configuration from the one ``kafka_config`` the bench hands around.

    That configuration is what consumers and admin clients take; a producer adds what
    every producer on a sagalog cluster sets, the Java client's partitioner above all,
    so that a keyed record lands where sagalog's own producers would put it.
    """
    return {**kafka_config, **PRODUCER_ONLY, **overrides}


# --- the machine -----------------------------------------------------------------------


@dataclass(frozen=True)
class MachineDescription:
    """Where the figures were taken; they mean little without it."""

    cores: int
    memory_gib: float
    cpu_model: str
    platform: str
    python: str
    confluent_kafka: str
    librdkafka: str
    kafka_bootstrap: str
    kafka_version: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return float("nan")


def describe_machine(
    *, bootstrap_servers: str, kafka_version: str = "unknown"
) -> MachineDescription:
    """The cores this process may use, memory, CPU, Python, client and broker versions."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 0
    return MachineDescription(
        cores=cores,
        memory_gib=round(_memory_gib(), 1),
        cpu_model=_cpu_model(),
        platform=platform.platform(),
        python=sys.version.split()[0],
        confluent_kafka=importlib.metadata.version("confluent-kafka"),
        librdkafka=confluent_kafka.libversion()[0],
        kafka_bootstrap=bootstrap_servers,
        kafka_version=kafka_version,
    )


# --- records and consuming ---------------------------------------------------------------


def raw_records(*, value_size: int = 200, keys: int = 1000, seed: int = 7) -> RecordFactory:
    """Opaque records of ``value_size`` bytes, keyed over ``keys`` workflow-like ids."""
    value = random.Random(seed).randbytes(value_size)

    def record(i: int) -> tuple[bytes, bytes, Headers]:
        return f"wf-{i % keys}".encode(), value, []

    return record


def sent_ns_of(message: Message) -> int | None:
    """The intended publish time a record carries, or None when it carries none."""
    headers = message.headers()
    if not headers:
        return None
    for name, raw in headers.items() if isinstance(headers, dict) else headers:
        if name == SENT_HEADER and raw is not None:
            return int(raw)
    return None


def take_available(consumer: Consumer, *, max_messages: int, wait_s: float) -> list[Message]:
    """Every record already fetched (up to ``max_messages``), else wait for the first one.

    ``Consumer.consume(n, timeout)`` waits until it has ``n`` records or the timeout
    passes, which would add the batching delay to every record's pickup time. Taking
    what is there and otherwise blocking for a single record batches under load and
    still picks up a lone record the moment it arrives.
    """
    messages: list[Message] = consumer.consume(num_messages=max_messages, timeout=0)
    if not messages:
        one = consumer.poll(timeout=wait_s)
        messages = [] if one is None else [one]
    for message in messages:
        error = message.error()
        if error is not None and error.code() != KafkaError._PARTITION_EOF:
            raise confluent_kafka.KafkaException(error)
    return [m for m in messages if m.error() is None]


# --- latency ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatencySummary:
    """Percentiles in milliseconds (nearest rank, so every figure is an observed value)."""

    count: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    mean_ms: float


class LatencyRecorder:
    """Latencies in nanoseconds, kept compactly; numpy computes the percentiles when present."""

    def __init__(self, values_ns: Iterable[int] = ()) -> None:
        self._ns = array("q", values_ns)

    def record(self, latency_ns: int) -> None:
        self._ns.append(latency_ns)

    def extend(self, latencies_ns: Iterable[int]) -> None:
        self._ns.extend(latencies_ns)

    def __len__(self) -> int:
        return len(self._ns)

    def percentiles_ms(self, quantiles: Sequence[float]) -> list[float]:
        """Nearest-rank percentiles (0-100) in ms; NaN when nothing was recorded."""
        if not self._ns:
            return [float("nan")] * len(quantiles)
        try:
            import numpy as np  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            ordered = sorted(self._ns)
            n = len(ordered)
            ranks = [max(1, math.ceil(q / 100 * n)) for q in quantiles]
            return [ordered[r - 1] / 1e6 for r in ranks]
        values = np.frombuffer(self._ns, dtype=np.int64)
        found = np.percentile(values, list(quantiles), method="inverted_cdf")
        return [float(v) / 1e6 for v in found]

    def summary(self) -> LatencySummary:
        p50, p99, p999, top = self.percentiles_ms([50, 99, 99.9, 100])
        mean = sum(self._ns) / len(self._ns) / 1e6 if self._ns else float("nan")
        return LatencySummary(len(self._ns), p50, p99, p999, top, mean)


def write_pickups(path: Path, pickups: Iterable[tuple[int, int]]) -> None:
    """Write ``(sent_ns, picked_ns)`` pairs, one ``"sent picked"`` line each, atomically.

    A relay under test calls this at exit; the file appears whole or not at all.
    """
    staging = path.with_name(path.name + ".partial")
    with staging.open("w") as out:
        out.writelines(f"{sent} {picked}\n" for sent, picked in pickups)
    staging.replace(path)


def read_pickups(path: Path) -> list[tuple[int, int]]:
    pairs = []
    with path.open() as source:
        for line in source:
            sent, picked = line.split()
            pairs.append((int(sent), int(picked)))
    return pairs


# --- open-loop load ---------------------------------------------------------------------


@dataclass(frozen=True)
class LoadReport:
    """What the generator managed; a large lag means the machine, not the relay, was short."""

    sent: int
    target_per_s: float
    achieved_per_s: float
    duration_s: float
    lag: LatencySummary
    delivery_errors: int
    end_offsets: dict[int, int]
    """Per partition, the offset after the last record delivered: where a consumer is done."""


class GeneratorProducer:
    """The load generator's producer, made on first use and kept for the whole run.

    A new idempotent librdkafka producer holds its first records for about 500 ms: it
    asks for its producer id before a broker connection is up and, not being
    transactional, retries on a fixed 500 ms timer. Made afresh for every probe, that
    wait fell on the first ~1% of each probe's start events and read as a 240 ms p99
    on the saga's first hop at every load; made once, only the uncounted warm-up pays.
    """

    def __init__(self, kafka_config: Mapping[str, Any]) -> None:
        self._config = producer_config(kafka_config, **{"linger.ms": 1})
        self._producer: Producer | None = None

    def get(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self._config)
        return self._producer

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None


@dataclass
class OpenLoopLoad:
    """Publishes ``count`` records at ``rate_per_s`` on a fixed timeline.

    Record ``i`` is due at ``start + i / rate``. The generator sleeps when it is early
    and, when it is late, sends every overdue record at once and records how late it
    was (``LoadReport.lag``) instead of slowing down. Each record carries its due time
    (wall clock, ns) in the ``bench_sent_ns`` header.

    It wakes at most once per ``tick_s``: waking for every record at tens of thousands
    per second doubled the generator's CPU and the broker's (tiny produce requests),
    which on a 2-core machine is taken from the relay under test. The price, up to one
    tick of lag per record, is in the lag report and, being measured from the due
    time, in every latency.
    """

    producer: Producer
    topic: str
    rate_per_s: float
    count: int
    records: RecordFactory
    tick_s: float = 0.0005
    monotonic_ns: Callable[[], int] = time.perf_counter_ns
    wall_ns: Callable[[], int] = time.time_ns
    sleep: Callable[[float], None] = time.sleep

    def run(self) -> LoadReport:
        if self.rate_per_s <= 0 or self.count <= 0:
            raise ValueError(f"open-loop load needs a positive rate and count, got {self}")
        interval_ns = 1e9 / self.rate_per_s
        errors = 0
        end_offsets: dict[int, int] = {}

        def delivered(error: KafkaError | None, message: Message) -> None:
            nonlocal errors
            partition, offset = message.partition(), message.offset()
            if error is not None or partition is None or offset is None:
                errors += 1
            else:
                end_offsets[partition] = max(end_offsets.get(partition, 0), offset + 1)

        lag = LatencyRecorder()
        start_mono = self.monotonic_ns()
        start_wall = self.wall_ns()
        i = 0
        while i < self.count:
            now = self.monotonic_ns()
            due = start_mono + int(i * interval_ns)
            if due > now:
                self.sleep(max((due - now) / 1e9, self.tick_s))
                continue
            while i < self.count and (due := start_mono + int(i * interval_ns)) <= now:
                key, value, headers = self.records(i)
                headers = [*headers, (SENT_HEADER, str(start_wall + due - start_mono).encode())]
                self._produce(key, value, headers, delivered)
                lag.record(self.monotonic_ns() - due)
                i += 1
            self.producer.poll(0)
        duration_s = (self.monotonic_ns() - start_mono) / 1e9
        unsent = self.producer.flush(30)
        return LoadReport(
            sent=self.count,
            target_per_s=self.rate_per_s,
            achieved_per_s=self.count / duration_s,
            duration_s=duration_s,
            lag=lag.summary(),
            delivery_errors=errors + unsent,
            end_offsets=end_offsets,
        )

    def _produce(
        self,
        key: bytes,
        value: bytes,
        headers: Headers,
        delivered: Callable[[KafkaError | None, Message], None],
    ) -> None:
        while True:
            try:
                self.producer.produce(
                    self.topic, value, key, headers=headers, on_delivery=delivered
                )
                return
            except BufferError:  # the local queue is full: the lag records the wait
                self.producer.poll(0.005)


# --- results --------------------------------------------------------------------------


def write_results(path: Path, mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``mapping`` into the JSON object at ``path``, keeping every other key.

    Later benchmarks add their own keys to the same file; none overwrites another's.
    """
    merged: dict[str, Any] = {}
    if path.exists():
        merged = json.loads(path.read_text() or "{}")
    merged.update(_json_safe(dict(mapping)))
    staging = path.with_name(path.name + ".partial")
    path.parent.mkdir(parents=True, exist_ok=True)
    staging.write_text(json.dumps(merged, indent=2, sort_keys=True, allow_nan=False) + "\n")
    staging.replace(path)
    return merged


def _json_safe(value: Any) -> Any:
    """NaN and infinity (an empty percentile) become null: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def print_table(
    title: str, rows: Sequence[tuple[str, str]], *, out: Callable[[str], None] = print
) -> None:
    """Two aligned columns under a title, for a person reading the terminal."""
    width = max((len(name) for name, _ in rows), default=0)
    out(title)
    out("-" * max(len(title), width + 24))
    for name, value in rows:
        out(f"{name:<{width}}  {value}")


def print_figures(
    title: str,
    key: str,
    figures: Mapping[Any, dict[str, Any]],
    row: Callable[[Any, dict[str, Any]], tuple[str, str]],
) -> None:
    """A stand-alone bench's output: a table of one row per figure set, then the
    figures as one JSON line under ``key``: a person and a script read the same run."""
    print_table(title, [row(name, f) for name, f in figures.items()])
    print(json.dumps({key: figures}))
