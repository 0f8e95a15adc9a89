"""Handoff: how fast a relay moves events from one topic to the next, and how promptly.

The measurement treats the relay as a black box in its own process, so the same code
drives the raw confluent-kafka baseline (``raw_handoff.py``) and a sagalog agent:

1. create ``bench.<uuid>.in`` and ``.out``; start the relay with ``start_relay(job)``;
2. warm up: one record per partition must come out before anything is timed;
3. maximum throughput, ``rounds`` times: ``preload`` records are written to the input
   in one transaction, invisible to a read_committed relay until the commit; the clock
   runs from that commit until a read_committed counter has seen all of them in the
   output. The median round is the figure (this machine is shared; one round can be
   unlucky);
4. latency: open-loop load at ``load_fraction`` of that maximum for ``duration_s``. The
   relay records, for every input record with a ``bench_sent_ns`` header, when its loop
   picked the record up ("handler start") and writes the pairs to ``job.result_path``
   (``harness.write_pickups``) when it receives SIGTERM. The output counter is stopped
   first: on two cores its CPU would come out of the relay's share. The end of the phase
   is read from the relay group's committed offsets instead;
5. stop the relay, delete the topics and the consumer groups.

The relay contract: consume ``job.in_topic`` read_committed from the earliest offset
in group ``job.group_id`` and commit its offsets there; produce one output record to
``job.out_topic`` per input record; on SIGTERM finish or abort the open transaction,
write ``job.result_path`` and exit with status 0.
"""

from __future__ import annotations

import contextlib
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .harness import (
    LatencyRecorder,
    LatencySummary,
    LoadReport,
    OpenLoopLoad,
    RecordFactory,
    producer_config,
    raw_records,
    read_pickups,
    take_available,
)


class BenchmarkError(RuntimeError):
    """The benchmark could not produce a figure; the message names the step and the cause."""


@dataclass(frozen=True)
class RelayJob:
    """Everything a relay under test needs; ``measure_handoff`` owns the names."""

    in_topic: str
    out_topic: str
    group_id: str
    transactional_id: str
    result_path: Path


class RelayProcess(Protocol):
    """The part of ``subprocess.Popen`` the measurement uses."""

    def poll(self) -> int | None: ...
    def send_signal(self, sig: int, /) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


StartRelay = Callable[[RelayJob], RelayProcess]


@dataclass(frozen=True)
class HandoffResult:
    """The figures of one relay, all taken in one run."""

    throughput_per_s: float
    """Median of ``rounds_per_s``."""
    rounds_per_s: tuple[float, ...]
    preload: int
    pickup: LatencySummary
    """publish (intended time) → the relay's loop picks the record up."""
    load_fraction: float
    load: LoadReport
    saturated: bool
    """The pickup latency kept growing during the latency phase: the offered load was
    more than the relay (or the machine) could take, and the percentiles measure a
    queue rather than the handoff."""


class OutputCounter:
    """Counts committed output records in a thread; knows when the last one arrived."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str, group_id: str) -> None:
        self._consumer = Consumer(
            {
                **kafka_config,
                "group.id": group_id,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self._consumer.subscribe([topic])
        self._count = 0
        self._last_mono = 0.0
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="output-counter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                batch = take_available(self._consumer, max_messages=5000, wait_s=0.05)
                if not batch:
                    continue
                now_mono = time.perf_counter()
                with self._changed:
                    self._count += len(batch)
                    self._last_mono = now_mono
                    self._changed.notify_all()
        except BaseException as exc:
            with self._changed:
                self._failure = exc
                self._changed.notify_all()
        finally:
            self._consumer.close()

    def wait_for(self, count: int, *, timeout_s: float, relay: RelayProcess, step: str) -> float:
        """Block until ``count`` records came out; the perf_counter time the last arrived."""
        deadline = time.perf_counter() + timeout_s
        with self._changed:
            while self._count < count:
                if self._failure is not None:
                    raise BenchmarkError(f"{step}: the output counter failed: {self._failure}")
                if relay.poll() is not None:
                    raise BenchmarkError(
                        f"{step}: the relay exited with status {relay.poll()} after "
                        f"{self._count} of {count} records; see its stderr above"
                    )
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise BenchmarkError(
                        f"{step}: only {self._count} of {count} records reached the output "
                        f"within {timeout_s:g}s; is the relay consuming the input topic?"
                    )
                self._changed.wait(min(left, 0.25))
            return self._last_mono

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)


class RelayProgress:
    """Reads the relay's committed offsets without joining its group."""

    def __init__(self, kafka_config: Mapping[str, Any], job: RelayJob) -> None:
        self._consumer = Consumer(
            {**kafka_config, "group.id": job.group_id, "enable.auto.commit": False}
        )
        self._topic = job.in_topic

    def wait_committed(
        self, ends: Mapping[int, int], *, timeout_s: float, relay: RelayProcess, step: str
    ) -> None:
        """Block until the relay committed at least ``ends`` (partition → offset)."""
        partitions = [TopicPartition(self._topic, p) for p in sorted(ends)]
        deadline = time.perf_counter() + timeout_s
        while True:
            committed = {tp.partition: tp.offset for tp in self._consumer.committed(partitions, 10)}
            if all(committed[p] >= end for p, end in ends.items()):
                return
            if relay.poll() is not None:
                raise BenchmarkError(
                    f"{step}: the relay exited with status {relay.poll()} having committed "
                    f"offsets {committed} of {dict(ends)}; see its stderr above"
                )
            if time.perf_counter() > deadline:
                raise BenchmarkError(
                    f"{step}: the relay committed offsets {committed} of {dict(ends)} within "
                    f"{timeout_s:g}s; it cannot keep up with the load or has stalled"
                )
            time.sleep(0.2)  # asking the broker again; the relay's progress is not ours to await

    def close(self) -> None:
        self._consumer.close()


def measure_handoff(
    start_relay: StartRelay,
    *,
    kafka_config: Mapping[str, Any],
    records: RecordFactory | None = None,
    partitions: int = 3,
    preload: int = 100_000,
    rounds: int = 3,
    load_fraction: float = 0.5,
    duration_s: float = 15.0,
    progress: Callable[[str], None] = print,
) -> HandoffResult:
    """Maximum throughput and pickup latency at ``load_fraction`` of it, for one relay.

    Args:
        start_relay: starts the relay under test in its own process (see the module doc).
        kafka_config: librdkafka settings for the cluster (``bootstrap.servers`` and auth).
        records: builds input record ``i``; ``raw_records()`` (200-byte values) by default.
            A sagalog agent needs registry-encoded events with CloudEvents headers.
        partitions: partitions of the input and output topics.
        preload: records moved in each throughput round.
        rounds: throughput rounds; the median is reported.
        load_fraction: offered load in the latency phase, as a share of the maximum.
        duration_s: length of the latency phase.
        progress: receives one line per step.
    """
    make_record = records or raw_records()
    run_id = f"bench.{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="sagalog-bench-") as scratch:
        job = RelayJob(
            in_topic=f"{run_id}.in",
            out_topic=f"{run_id}.out",
            group_id=f"{run_id}.relay",
            transactional_id=f"{run_id}.relay",
            result_path=Path(scratch) / "pickups.txt",
        )
        counter_group = f"{run_id}.counter"
        admin = AdminClient(dict(kafka_config))
        counter: OutputCounter | None = None
        progress_reader: RelayProgress | None = None
        relay: RelayProcess | None = None
        try:
            _create_topics(admin, [job.in_topic, job.out_topic], partitions)
            counter = OutputCounter(kafka_config, job.out_topic, counter_group)
            progress_reader = RelayProgress(kafka_config, job)
            relay = start_relay(job)
            progress(f"{run_id}: relay started, warming up")
            load_producer = Producer(producer_config(kafka_config, **{"linger.ms": 1}))
            for p in range(partitions):
                key, value, headers = make_record(p)
                load_producer.produce(job.in_topic, value, key, partition=p, headers=headers)
            load_producer.flush(30)
            moved = partitions
            counter.wait_for(moved, timeout_s=90, relay=relay, step="warm-up")

            rounds_per_s = []
            for n in range(rounds):
                progress(f"{run_id}: throughput round {n + 1}/{rounds}, {preload:,} records")
                started = _preload(kafka_config, job.in_topic, preload, make_record, run_id)
                moved += preload
                done = counter.wait_for(moved, timeout_s=120, relay=relay, step="throughput")
                rounds_per_s.append(preload / (done - started))
            throughput = statistics.median(rounds_per_s)
            counter.close()

            rate = throughput * load_fraction
            count = max(1, int(rate * duration_s))
            progress(f"{run_id}: open-loop load at {rate:,.0f}/s for {duration_s:g}s")
            load = OpenLoopLoad(load_producer, job.in_topic, rate, count, make_record).run()
            if load.delivery_errors:
                raise BenchmarkError(
                    f"latency: {load.delivery_errors} of {count} records were not delivered "
                    f"to {job.in_topic}; check the broker log"
                )
            progress_reader.wait_committed(
                load.end_offsets, timeout_s=120, relay=relay, step="latency"
            )
            pickups = _stop_relay(relay, job)
            relay = None
        finally:
            if relay is not None:
                relay.kill()
                relay.wait(10)
            if counter is not None:
                counter.close()
            if progress_reader is not None:
                progress_reader.close()
            _delete(admin, [job.in_topic, job.out_topic], [job.group_id, counter_group])
    if len(pickups) != count:
        raise BenchmarkError(
            f"latency: the relay reported {len(pickups)} pickups for {count} open-loop records; "
            "a relay must record every input record that has a bench_sent_ns header"
        )
    return HandoffResult(
        throughput_per_s=throughput,
        rounds_per_s=tuple(rounds_per_s),
        preload=preload,
        pickup=LatencyRecorder(picked - sent for sent, picked in pickups).summary(),
        load_fraction=load_fraction,
        load=load,
        saturated=_queue_grew(pickups),
    )


def _queue_grew(pickups: list[tuple[int, int]]) -> bool:
    """Whether the last fifth of the load waited far longer than the first fifth.

    Under a load the relay can take, pickup latency is flat over the run; beyond it,
    a queue builds and latency climbs with time.
    """
    ordered = sorted(pickups)
    fifth = max(1, len(ordered) // 5)
    first = LatencyRecorder(p - s for s, p in ordered[:fifth]).percentiles_ms([50])[0]
    last = LatencyRecorder(p - s for s, p in ordered[-fifth:]).percentiles_ms([50])[0]
    return last > 2 * first and last > first + 50


def _create_topics(admin: AdminClient, topics: list[str], partitions: int) -> None:
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics],
        operation_timeout=30,
    )
    for topic, future in futures.items():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            raise BenchmarkError(f"setup: could not create topic {topic}: {exc}") from exc


def _preload(
    kafka_config: Mapping[str, Any],
    topic: str,
    count: int,
    make_record: RecordFactory,
    run_id: str,
) -> float:
    """Write ``count`` records in one transaction; the perf_counter time of the commit."""
    producer = Producer(
        producer_config(kafka_config, **{"transactional.id": f"{run_id}.preload", "linger.ms": 20})
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(count):
        key, value, headers = make_record(i)
        while True:
            try:
                producer.produce(topic, value, key, headers=headers)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(60):
        raise BenchmarkError(f"throughput: the preload to {topic} did not finish in 60s")
    started = time.perf_counter()
    producer.commit_transaction(30)
    return started


def _stop_relay(relay: RelayProcess, job: RelayJob) -> list[tuple[int, int]]:
    relay.send_signal(signal.SIGTERM)
    try:
        status = relay.wait(60)
    except subprocess.TimeoutExpired as exc:
        raise BenchmarkError("stop: the relay did not exit within 60s of SIGTERM") from exc
    if status != 0:
        raise BenchmarkError(f"stop: the relay exited with status {status}; see its stderr")
    if not job.result_path.exists():
        raise BenchmarkError(f"stop: the relay exited without writing {job.result_path}")
    return read_pickups(job.result_path)


def _delete(admin: AdminClient, topics: list[str], groups: list[str]) -> None:
    """Best effort: a leftover topic is untidy, not worth hiding the real error for."""
    for future in admin.delete_consumer_groups(groups, request_timeout=15).values():
        with contextlib.suppress(KafkaException):
            future.result(timeout=15)
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        with contextlib.suppress(KafkaException):
            future.result(timeout=30)
