"""Sagas end to end: sustained sagas/s under open-loop load, handoff latency by load, idle cost.

The system under test is the whole platform as separate processes on the real broker:
the saga tracker (``python -m sagalog.services.tracker``, wall clock) and five relay agents
(``python -m tests.bench.saga_agents --step N``, the full agent runtime), on a
throwaway project whose topics, groups, app id and registry subjects carry one
unique suffix and are deleted at the end, even on failure. The flow
(``benchsaga.v1.yaml``) has five steps and no gate; the agent of step N reacts to
step N's start event by publishing its completion. The load generator publishes
``RequestSubmitted`` events at a fixed rate (``harness.OpenLoopLoad``: arrivals never
wait for the system), one new workflow each.

Every figure is read back from the log, from CreateTimes (stamped by each producer
when it hands a record to its client library):

- **a saga completes** when the tracker publishes its ``completed`` transition;
- **handoff**: an agent's output CreateTime minus the CreateTime of the event that
  caused it (``ce_causationid``): five per saga, one per step. The tracker's own
  handoff (an event to the transition it causes) is reported apart;
- **end to end**: the completion's CreateTime minus the intended publish time of the
  saga's ``RequestSubmitted`` (``bench_sent_ns``), so a generator that falls behind
  cannot hide a stall.

A probe at rate R for D seconds is **sustained** when every saga completed, the
middle 80% of the completions came at >= 95% of the arrival rate, the median
end-to-end latency of the last fifth of the arrivals is not above that of the
second and third tenths by more than max(50%, 100 ms), and the generator itself
kept to its timeline. The maximum is found by doubling from a start rate until a
probe fails, then bisecting; it is confirmed by one run of ``duration_s`` (60 s by
default) at that rate, stepped down by 15% if it fails. ``sagas_per_s`` is the
completion rate of that run, during which py-spy samples the tracker and agent 3
(``per_event_costs``). Then ``latency_by_load``: a run at 25%, 50% and 80% of it.
The same search runs against plain transactional confluent-kafka chains
(``baseline_chain.py``) for ``sagas_ratio``.

Two experiments change the system under test and are off by default:
``tick_hz`` ticks the tracker's clock topic, ``tracker_fetch_wait_ms`` runs the
tracker with another aiokafka ``fetch_max_wait_ms`` (``run_patched_tracker``).

Idle cost: the tracker's five-step test flow with its gate, ``N`` workflows preloaded
up to the gate (as ``tracker.py`` does), the tracker (wall clock), the five agents of
that flow (their groups' offsets set to the end of the log, so each rebuilds its
projection of the ``N`` workflows from the log and then waits) and the gateway (its
read model of ``N`` pending reviews); then every process's CPU over ``idle_s`` and
its RSS from ``/proc``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders, new_event_id
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.validation import to_avro_datum
from sagalog.devstack.layout import StackLayout
from sagalog.devstack.processes import is_running, read_pid_record
from sagalog.devstack.settings import DevStackSettings
from sagalog.settings import ClientSettings
from sagalog.topology.apply import TopologyClient
from sagalog.topology.loader import load_topology
from sagalog.tracker.ticks import clock_topic

from .broker_metrics import BrokerCounts, metrics_urls, scrape
from .broker_profile import BrokerProfiler
from .harness import (
    SENT_HEADER,
    GeneratorProducer,
    Headers,
    LatencyRecorder,
    LatencySummary,
    LoadReport,
    OpenLoopLoad,
    RecordFactory,
    producer_config,
)
from .saga_agents import agent_name, bench_flow, named_for_bench
from .tracker import (
    INPUTS,
    SECRET,
    TOPOLOGY,
    Lab,
    Profiler,
    Worker,
    cpu_seconds,
    machine_ticks,
    memory_mb,
)

REPO = Path(__file__).resolve().parents[2]
STEPS = 5
FETCH_WAIT_ENV = "BENCH_TRACKER_FETCH_WAIT_MS"
AGENT_LOG_LEVEL = "WARNING"
"""The bench agents log warnings only: a JSON line per handled event would be most of
the profile (as in the handoff bench); operators at hundreds of events/s do the same."""

Progress = Callable[[str], None]


class SagaBenchError(Exception):
    """A phase could not produce a figure; the message says which and why (log excerpt)."""


# --- processes ---------------------------------------------------------------------------


@dataclass
class Service(Worker):
    """A service process (``python -m <module> <args>``); logs as ``Worker`` reads them."""

    module: str = "sagalog.services.tracker"
    args: tuple[str, ...] = ()

    def start(self) -> Service:
        with self.log.open("ab") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.args],
                cwd=REPO,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
        return self


def service_env(extra: Mapping[str, Any]) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO / "services"), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTHONUNBUFFERED": "1",
        **{key: str(value) for key, value in extra.items()},
    }


def prefixed(prefix: str, **values: Any) -> dict[str, str]:
    return {f"{prefix}{key.upper()}": str(value) for key, value in values.items()}


def stop_all(services: Iterable[Worker], problems: list[str]) -> None:
    for service in services:
        try:
            service.stop(30)
        except Exception as exc:
            problems.append(f"stopping {service.name}: {exc}")
            service.kill()


# --- the broker: cleanup and reading back ----------------------------------------------


def delete_suffixed(
    settings: ClientSettings, suffix: str, *, groups_for_s: float = 45
) -> list[str]:
    """Delete every topic, consumer group and registry subject whose name holds ``suffix``.

    Agents use static membership, whose members do not leave the group on close: the
    group stays non-empty until their session times out (10 s), so deleting groups is
    retried for ``groups_for_s``. Transactional ids cannot be deleted; the broker
    expires them (``transactional.id.expiration.ms``).
    """
    problems: list[str] = []
    admin = AdminClient(settings.kafka_config())
    deadline = time.monotonic() + groups_for_s
    while True:
        try:
            groups = [
                g.group_id
                for g in admin.list_consumer_groups().result(15).valid
                if suffix in g.group_id
            ]
        except Exception as exc:
            problems.append(f"listing groups: {exc}")
            break
        failed = []
        for group, future in (
            admin.delete_consumer_groups(groups, request_timeout=15).items() if groups else []
        ):
            try:
                future.result(15)
            except KafkaException as exc:
                failed.append(f"{group}: {exc.args[0].str() if exc.args else exc}")
        if not failed:
            break
        if time.monotonic() > deadline:
            problems.append(f"groups not deleted: {failed}")
            break
        time.sleep(2)
    try:
        mine = [t for t in admin.list_topics(timeout=15).topics if suffix in t]
        if mine:
            for topic, future in admin.delete_topics(mine, operation_timeout=30).items():
                try:
                    future.result(30)
                except KafkaException as exc:
                    problems.append(f"topic {topic}: {exc}")
    except Exception as exc:
        problems.append(f"deleting topics: {exc}")
    try:
        registry = SchemaRegistryClient(settings.registry_config())
        for subject in registry.get_subjects():
            if suffix in subject:
                registry.delete_subject(subject)
                registry.delete_subject(subject, permanent=True)
    except Exception as exc:
        problems.append(f"deleting subjects: {exc}")
    return problems


Marks = dict[str, dict[int, int]]
"""Per topic, per partition: a high watermark."""


def watermarks(consumer: Consumer, topics: Iterable[str]) -> Marks:
    marks: Marks = {}
    for topic in topics:
        partitions = consumer.list_topics(topic, timeout=15).topics[topic].partitions
        marks[topic] = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in partitions
        }
    return marks


def grown(before: Marks, after: Marks, topic: str) -> int:
    return sum(high - before[topic].get(p, 0) for p, high in after[topic].items())


def read_range(
    kafka_config: Mapping[str, Any],
    topic: str,
    start: Mapping[int, int],
    end: Mapping[int, int],
    *,
    group: str,
    idle_timeout_s: float = 60,
) -> list[Message]:
    """The committed records of ``topic`` from ``start`` up to ``end`` (exclusive)."""
    todo = {p for p, high in end.items() if high > start.get(p, 0)}
    if not todo:
        return []
    consumer = Consumer(
        {
            **kafka_config,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    found: list[Message] = []
    try:
        consumer.assign([TopicPartition(topic, p, start.get(p, 0)) for p in todo])
        last_seen = time.monotonic()
        while todo:
            messages = consumer.consume(10_000, 1.0)
            if not messages and time.monotonic() - last_seen > idle_timeout_s:
                raise SagaBenchError(
                    f"reading {topic}: nothing for {idle_timeout_s:g}s, {todo} left"
                )
            for message in messages:
                last_seen = time.monotonic()
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    if offset >= end[partition]:
                        todo.discard(partition)
                    continue
                if offset >= end[partition]:
                    todo.discard(partition)
                    continue
                found.append(message)
                if offset + 1 >= end[partition]:
                    todo.discard(partition)
    finally:
        consumer.close()
    return found


def header_values(message: Message, names: frozenset[str]) -> dict[str, str]:
    headers = message.headers() or []
    pairs = headers.items() if isinstance(headers, dict) else headers
    return {
        name: raw.decode() if isinstance(raw, bytes) else str(raw)
        for name, raw in pairs
        if name in names and raw is not None
    }


# --- a probe: open-loop load at one rate, read back, judged -----------------------------


@dataclass
class SagaAnalysis:
    """What the log says about one probe's sagas."""

    sent_ns: dict[str, int] = field(default_factory=dict)
    """Per saga: the intended publish time of its first event."""
    done_ms: dict[str, int] = field(default_factory=dict)
    """Per completed saga: the CreateTime of its completion."""
    handoff_ns: LatencyRecorder | None = None
    handoff_by_step_ns: dict[str, LatencyRecorder] = field(default_factory=dict)
    tracker_handoff_ns: LatencyRecorder | None = None


class SagaSystem(Protocol):
    """A saga system under load: what ``run_probe`` needs from it."""

    name: str
    input_topic: str
    completion_topic: str
    per_saga: int
    """Records written to ``completion_topic`` per saga."""

    def records(self, tag: str) -> RecordFactory: ...
    def marks(self) -> Marks: ...
    def analyze(self, before: Marks, after: Marks, *, detail: bool) -> SagaAnalysis: ...
    def pids(self) -> dict[str, int]: ...
    def check_alive(self, doing: str) -> None: ...
    def generator(self) -> Producer:
        """The load generator's producer: one for the whole run (see ``GeneratorProducer``)."""
        ...


@dataclass
class ProbeResult:
    label: str
    load: LoadReport
    duration_s: float
    completed: int
    steady_per_s: float
    """Completions per second over the middle 80% of the completions."""
    e2e: LatencySummary
    e2e_early_p50_ms: float
    e2e_late_p50_ms: float
    drain_s: float | None
    """From the last intended arrival to the last completion."""
    cpu_pct: dict[str, float]
    machine_busy_pct: float
    sustained: bool
    verdict: str
    handoff: LatencySummary | None = None
    handoff_by_step: dict[str, LatencySummary] = field(default_factory=dict)
    tracker_handoff: LatencySummary | None = None
    broker: dict[str, Any] | None = None
    """What the broker did per completed saga (``broker_metrics``), when it serves metrics."""

    @property
    def cpu_us_per_saga(self) -> dict[str, float]:
        """Each process's CPU during the load, per saga that arrived meanwhile."""
        rate = max(self.load.achieved_per_s, 1e-9)
        return {name: round(pct / 100 * 1e6 / rate) for name, pct in self.cpu_pct.items()}

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "label": self.label,
            "target_per_s": round(self.load.target_per_s, 1),
            "arrivals_per_s": round(self.load.achieved_per_s, 1),
            "duration_s": round(self.duration_s, 1),
            "sent": self.load.sent,
            "completed": self.completed,
            "completions_per_s": round(self.steady_per_s, 1),
            "e2e_p50_ms": _ms(self.e2e.p50_ms),
            "e2e_p99_ms": _ms(self.e2e.p99_ms),
            "e2e_max_ms": _ms(self.e2e.max_ms),
            "e2e_early_p50_ms": _ms(self.e2e_early_p50_ms),
            "e2e_late_p50_ms": _ms(self.e2e_late_p50_ms),
            "drain_s": None if self.drain_s is None else round(self.drain_s, 2),
            "generator_lag_p99_ms": _ms(self.load.lag.p99_ms),
            "cpu_pct": {k: round(v, 1) for k, v in self.cpu_pct.items()},
            "cpu_us_per_saga": self.cpu_us_per_saga,
            "machine_busy_pct": round(self.machine_busy_pct, 1),
            "sustained": self.sustained,
            "verdict": self.verdict,
        }
        if self.handoff is not None:
            found |= _percentiles("handoff", self.handoff)
            found["handoff_by_step"] = {
                step: _percentiles("handoff", s) for step, s in self.handoff_by_step.items()
            }
        if self.tracker_handoff is not None:
            found |= _percentiles("tracker_handoff", self.tracker_handoff)
        if self.broker is not None:
            found["broker"] = self.broker
        return found


def _ms(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 2)


def _percentiles(prefix: str, summary: LatencySummary) -> dict[str, Any]:
    return {
        f"{prefix}_p50_ms": _ms(summary.p50_ms),
        f"{prefix}_p99_ms": _ms(summary.p99_ms),
        f"{prefix}_p999_ms": _ms(summary.p999_ms),
        f"{prefix}_max_ms": _ms(summary.max_ms),
        f"{prefix}_count": summary.count,
    }


#: How long the completion topic must stand still once it grew enough (``wait_drained``).
SETTLE_S = 1.5


def wait_drained(
    system: SagaSystem, before: Marks, expected: int, *, timeout_s: float, quiet_s: float
) -> bool:
    """Until ``expected`` completion records are in, or none came for ``quiet_s`` after
    ``timeout_s``; whether every one came."""
    started = time.monotonic()
    last, last_change = -1, started
    while True:
        system.check_alive("draining a probe")
        count = grown(before, system.marks(), system.completion_topic)
        now = time.monotonic()
        if count != last:
            last, last_change = count, now
        # Offsets, not records: written in transactions, the topic's commit markers
        # take offsets too, so ``expected`` is reached before the last completions;
        # the end is ``expected`` and no growth since.
        if count >= expected and now - last_change >= SETTLE_S:
            return True
        if now - started > timeout_s and now - last_change > quiet_s:
            return False
        time.sleep(0.25)


def run_probe(
    system: SagaSystem,
    *,
    rate: float,
    duration_s: float,
    label: str,
    detail: bool,
    progress: Progress,
    on_load_start: Callable[[], None] | None = None,
    drain_timeout_s: float | None = None,
) -> ProbeResult:
    count = max(1, round(rate * duration_s))
    before = system.marks()
    pids = {**system.pids(), "generator": os.getpid(), **stack_pids()}
    broker_urls = metrics_urls()
    broker_before = scrape(broker_urls)
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    busy_before, total_before = machine_ticks()
    started = time.monotonic()
    producer = system.generator()
    if on_load_start is not None:
        on_load_start()
    load = OpenLoopLoad(
        producer=producer,
        topic=system.input_topic,
        rate_per_s=rate,
        count=count,
        records=system.records(label),
    ).run()
    elapsed = time.monotonic() - started
    cpu_pct = {
        name: 100 * (cpu_seconds(pid) - cpu_before[name]) / elapsed for name, pid in pids.items()
    }
    busy_after, total_after = machine_ticks()
    machine_busy = 100 * (busy_after - busy_before) / max(1, total_after - total_before)
    timeout = drain_timeout_s if drain_timeout_s is not None else max(30.0, duration_s)
    wait_drained(system, before, count * system.per_saga, timeout_s=timeout, quiet_s=10)
    broker_after = scrape(broker_urls)
    analysis = system.analyze(before, system.marks(), detail=detail)
    broker = None if broker_before is None or broker_after is None else broker_after - broker_before
    result = judge(label, load, analysis, duration_s, cpu_pct, machine_busy, broker=broker)
    progress(
        f"{system.name} {label}: {rate:,.1f}/s for {duration_s:g}s -> "
        f"{result.completed:,}/{load.sent:,} completed, {result.steady_per_s:,.1f}/s, "
        f"e2e p50 {result.e2e.p50_ms:,.0f} ms (early {result.e2e_early_p50_ms:,.0f}, late "
        f"{result.e2e_late_p50_ms:,.0f}), machine {machine_busy:.0f}% busy: {result.verdict}"
    )
    return result


def judge(
    label: str,
    load: LoadReport,
    analysis: SagaAnalysis,
    duration_s: float,
    cpu_pct: dict[str, float],
    machine_busy_pct: float,
    *,
    broker: BrokerCounts | None = None,
) -> ProbeResult:
    """The probe's figures and verdict; ``broker``: what the broker counted meanwhile."""
    arrivals = sorted((sent, saga) for saga, sent in analysis.sent_ns.items())
    e2e = LatencyRecorder()
    early, late = LatencyRecorder(), LatencyRecorder()
    n = len(arrivals)
    for i, (sent, saga) in enumerate(arrivals):
        done = analysis.done_ms.get(saga)
        if done is None:
            continue
        latency = done * 1_000_000 - sent
        e2e.record(latency)
        if n >= 10 and n // 10 <= i < 3 * n // 10:
            early.record(latency)
        elif n >= 10 and i >= 8 * n // 10:
            late.record(latency)
    completed = len(analysis.done_ms)
    steady = 0.0
    drain_s = None
    if arrivals and len(analysis.done_ms) >= 10:
        # The middle 80% of the completions over the time they took: unbiased by a
        # constant latency, and lower than the arrival rate when a queue builds.
        finished = sorted(analysis.done_ms.values())
        n_done = len(finished)
        lo, hi = finished[n_done // 10], finished[(9 * n_done) // 10]
        steady = (9 * n_done // 10 - n_done // 10) / max((hi - lo) / 1000, 1e-3)
        drain_s = (finished[-1] - arrivals[-1][0] / 1e6) / 1000
    early_p50 = early.percentiles_ms([50])[0]
    late_p50 = late.percentiles_ms([50])[0]
    reasons = []
    if load.delivery_errors:
        reasons.append(f"{load.delivery_errors} arrivals not delivered")
    if load.lag.p99_ms > 100:
        reasons.append(f"the generator fell behind its timeline (lag p99 {load.lag.p99_ms:.0f} ms)")
    if completed < load.sent:
        reasons.append(f"{load.sent - completed:,} of {load.sent:,} sagas never completed")
    if steady < 0.95 * load.achieved_per_s:
        reasons.append(
            f"completions {steady:,.1f}/s < 95% of arrivals {load.achieved_per_s:,.1f}/s"
        )
    if not math.isnan(early_p50) and late_p50 > early_p50 + max(0.5 * early_p50, 100):
        reasons.append(f"latency grew: p50 {early_p50:,.0f} -> {late_p50:,.0f} ms")
    return ProbeResult(
        label=label,
        load=load,
        duration_s=duration_s,
        completed=completed,
        steady_per_s=steady,
        e2e=e2e.summary(),
        e2e_early_p50_ms=early_p50,
        e2e_late_p50_ms=late_p50,
        drain_s=drain_s,
        cpu_pct=cpu_pct,
        machine_busy_pct=machine_busy_pct,
        sustained=not reasons,
        verdict="sustained" if not reasons else "; ".join(reasons),
        handoff=None if analysis.handoff_ns is None else analysis.handoff_ns.summary(),
        handoff_by_step={k: v.summary() for k, v in analysis.handoff_by_step_ns.items()},
        tracker_handoff=(
            None if analysis.tracker_handoff_ns is None else analysis.tracker_handoff_ns.summary()
        ),
        broker=None if broker is None else broker.per(completed),
    )


@dataclass
class MaxRate:
    """The search and its confirmation; ``rate`` is None when nothing was sustained."""

    rate: float | None
    probes: list[ProbeResult]
    confirmed: ProbeResult | None
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self, prefix: str) -> dict[str, Any]:
        run = self.confirmed
        return {
            f"{prefix}_per_s": None if run is None else round(run.steady_per_s, 1),
            f"{prefix}_rate_per_s": self.rate,
            f"{prefix}_run": None if run is None else run.as_dict(),
            f"{prefix}_probes": [p.as_dict() for p in self.probes],
        }


def find_max_rate(
    system: SagaSystem,
    *,
    start_rate: float,
    probe_s: float,
    probes: int,
    cap: float,
    progress: Progress,
) -> tuple[float | None, list[ProbeResult]]:
    """Double from ``start_rate`` until a probe fails, then bisect; the best sustained rate."""
    results: list[ProbeResult] = []
    good: float | None = None
    bad: float | None = None
    rate = start_rate
    while len(results) < probes:
        result = run_probe(
            system,
            rate=rate,
            duration_s=probe_s,
            label=f"probe{len(results)}",
            detail=False,
            progress=progress,
        )
        results.append(result)
        if result.sustained:
            good = rate
        else:
            bad = rate
        if bad is None:
            if rate >= cap:
                break
            rate = min(cap, rate * 2)
        elif good is None:
            rate = rate / 2
            if rate < 1:
                break
        else:
            if bad / good < 1.08:
                break
            rate = round((good + bad) / 2, 1)
    return good, results


def confirm_rate(
    system: SagaSystem,
    rate: float,
    *,
    duration_s: float,
    progress: Progress,
    attempts: int = 3,
    on_load_start: Callable[[], None] | None = None,
) -> tuple[float | None, list[ProbeResult], ProbeResult | None]:
    """``duration_s`` at ``rate``; 15% lower after a failure. (rate, runs, the passing run)."""
    runs = []
    for attempt in range(attempts):
        run = run_probe(
            system,
            rate=rate,
            duration_s=duration_s,
            label=f"sustained{attempt}",
            detail=True,
            progress=progress,
            on_load_start=on_load_start,
            drain_timeout_s=max(30.0, duration_s / 2),
        )
        runs.append(run)
        if run.sustained:
            return rate, runs, run
        rate = round(rate * 0.85, 1)
    return None, runs, None


# --- sagalog: the tracker and five agents -----------------------------------------------


class SagalogSystem:
    """The bench flow on a throwaway project, the tracker and five relay agents."""

    name = "sagalog"
    per_saga = STEPS + 1
    """Transitions per saga: initiated -> running, four step changes, -> completed."""

    def __init__(
        self, settings: ClientSettings, scratch: Path, *, partitions: int, progress: Progress
    ) -> None:
        self.suffix = f"sagabench{uuid.uuid4().hex[:10]}"
        self.scratch = scratch
        self.root = scratch / "project"
        self.settings = settings.model_copy(update={"project_dir": str(self.root)})
        self.kafka_config = self.settings.kafka_config()
        self.partitions = partitions
        self.progress = progress
        s = self.suffix
        self.input_topic = f"benchsaga.events.{s}"
        self.completion_topic = f"transitions.{s}"
        self.alerts_topic = f"alerts.{s}"
        self.deadletter_topic = f"deadletter.{s}"
        self.app_id = f"saga-tracker-{s}"
        self.services: dict[str, Service] = {}
        self._reader: Consumer | None = None
        self._generator = GeneratorProducer(self.kafka_config)
        self._ticking: threading.Event | None = None
        self.tracker_fetch_wait_ms = 0
        """Non-zero: run the tracker with this aiokafka ``fetch_max_wait_ms`` (an experiment)."""
        self.keep_logs: Path | None = None
        """Where ``close`` copies the services' logs, if anywhere."""
        self.cohosted = False
        """Run the five agents in one process (``sagalog run agents``), not five."""

    # -- setup ---------------------------------------------------------------------

    def setup(self) -> SagalogSystem:
        shutil.copytree(REPO / "schemas", self.root / "schemas")
        flows = self.root / "topology" / "flows"
        flows.mkdir(parents=True)
        topology = TOPOLOGY.replace("orders.events.{s}", self.input_topic)
        (self.root / "topology" / "topics.yaml").write_text(
            topology.replace("{s}", self.suffix).replace("{p}", str(self.partitions))
        )
        (flows / "benchsaga.v1.yaml").write_text(bench_flow(self.input_topic, f"-{self.suffix}"))
        self.catalog = SchemaCatalog.load(self.root / "schemas")
        client = TopologyClient(self.settings, self.catalog)
        plan = client.plan(load_topology(self.root / "topology", known_schemas=self.catalog))
        client.apply(plan, report=lambda _: None)
        self.codec = EventCodec(catalog=self.catalog, registry=SchemaRegistry(self.settings))
        admin = AdminClient(self.kafka_config)
        clock = clock_topic(self.app_id)
        for future in admin.create_topics([NewTopic(clock, self.partitions)]).values():
            future.result(30)  # before the tracker starts: see tracker.Lab.start_clock
        submitted = "procurement.v1.RequestSubmitted"
        body = dict(INPUTS[0][1])
        datum = to_avro_datum(self.catalog[submitted].definition, body, event_type=submitted)
        self.submitted_value = self.codec.encode(self.input_topic, submitted, datum)
        return self

    def start(self) -> None:
        patched = self.tracker_fetch_wait_ms > 0
        self.services["tracker"] = Service(
            name="tracker",
            env=service_env(
                {**self._tracker_env(), FETCH_WAIT_ENV: self.tracker_fetch_wait_ms}
                if patched
                else self._tracker_env()
            ),
            log=self.scratch / "tracker.log",
            module="tests.bench.sagas" if patched else "sagalog.services.tracker",
            args=("patched-tracker",) if patched else (),
        ).start()
        for name, steps in self.agent_processes().items():
            self.services[name] = Service(
                name=name,
                env=service_env(self._agent_env(name)),
                log=self.scratch / f"{name}.log",
                module="tests.bench.saga_agents",
                args=tuple(arg for step in steps for arg in ("--step", str(step))),
            ).start()

    def agent_processes(self) -> dict[str, tuple[int, ...]]:
        """The agent processes and the steps each runs: one per step, or, co-hosted,
        one process ("agents") for all five."""
        steps = tuple(range(1, STEPS + 1))
        if self.cohosted:
            return {"agents": steps}
        return {f"agent{step}": (step,) for step in steps}

    @property
    def profiled_agent(self) -> str:
        """The agent process py-spy samples: step 3's (the middle of the chain)."""
        return "agents" if self.cohosted else "agent3"

    def _tracker_env(self) -> dict[str, Any]:
        return prefixed(
            "SAGALOG_TRACKER_",
            project_dir=self.root,
            bootstrap_servers=self.settings.bootstrap_servers,
            schema_registry_url=self.settings.schema_registry_url,
            app_id=self.app_id,
            instance_id="a",
            data_dir=self.scratch / "data" / "tracker",
            gate_secret=SECRET,
            clock="wall",
            transitions_topic=self.completion_topic,
            alerts_topic=self.alerts_topic,
            deadletter_topic=self.deadletter_topic,
        )

    def _agent_env(self, process: str) -> dict[str, Any]:
        return prefixed(
            "BENCH_SAGA_AGENT_",
            chain="benchsaga",
            name_suffix=f"-{self.suffix}",
            project_dir=self.root,
            bootstrap_servers=self.settings.bootstrap_servers,
            schema_registry_url=self.settings.schema_registry_url,
            instance_id="a",
            data_dir=self.scratch / "data" / process,
            deadletter_topic=self.deadletter_topic,
            log_level=AGENT_LOG_LEVEL,
        )

    def start_ticks(self, hz: float) -> None:
        """Tick every clock partition ``hz`` times a second (an experiment, see ``--saga-tick-hz``).

        A wall-clock tracker reads a tick as "look for due timers now" and keeps its own
        time; what the ticks change is its consumer's fetch: a fetch that names only
        clock partitions (every workflow partition still has unconsumed records) waits
        for data up to faust's ``fetch_max_wait_ms`` (1500 ms), and a tick ends it.
        """
        from sagalog.tracker.ticks import encode_tick

        stop = self._ticking = threading.Event()
        producer = Producer(producer_config(self.kafka_config))
        clock = clock_topic(self.app_id)

        def tick() -> None:
            while not stop.wait(1 / hz):
                now = time.time_ns() // 1_000_000
                for partition in range(self.partitions):
                    producer.produce(clock, value=encode_tick(now), partition=partition)
                producer.poll(0)
            producer.flush(5)

        threading.Thread(target=tick, name="bench-ticks", daemon=True).start()

    def agent_name(self, step: int) -> str:
        return agent_name("benchsaga", step, f"-{self.suffix}")

    # -- the probe's side ----------------------------------------------------------

    def records(self, tag: str) -> RecordFactory:
        value = self.submitted_value
        submitted = "procurement.v1.RequestSubmitted"

        def record(i: int) -> tuple[bytes, bytes, Headers]:
            workflow = f"{tag}-{i:07d}"
            headers = EventHeaders(
                id=new_event_id(), type=submitted, source="bench/load", workflow_id=workflow
            )
            return workflow.encode(), value, headers.to_kafka()

        return record

    def generator(self) -> Producer:
        return self._generator.get()

    @property
    def reader(self) -> Consumer:
        if self._reader is None:
            self._reader = Consumer(
                {
                    **self.kafka_config,
                    "group.id": f"bench-reader-{self.suffix}",
                    "enable.auto.commit": False,
                }
            )
        return self._reader

    def marks(self) -> Marks:
        return watermarks(self.reader, [self.input_topic, self.completion_topic])

    def pids(self) -> dict[str, int]:
        return {name: service.pid for name, service in self.services.items() if service.alive}

    def check_alive(self, doing: str) -> None:
        for service in self.services.values():
            service.check_alive(doing)

    _EVENT_HEADERS = frozenset({"ce_id", "ce_type", "ce_causationid", "ce_workflowid", SENT_HEADER})

    def analyze(self, before: Marks, after: Marks, *, detail: bool) -> SagaAnalysis:
        group = f"bench-reader-{self.suffix}"
        analysis = SagaAnalysis()
        created: dict[str, int] = {}
        handoffs = LatencyRecorder()
        by_step: dict[str, LatencyRecorder] = {}
        for message in read_range(
            self.kafka_config,
            self.input_topic,
            before[self.input_topic],
            after[self.input_topic],
            group=group,
        ):
            headers = header_values(message, self._EVENT_HEADERS)
            stamp = message.timestamp()[1]
            event_id = headers.get("ce_id", "")
            created[event_id] = stamp
            sent = headers.get(SENT_HEADER)
            if sent is not None:
                analysis.sent_ns[headers.get("ce_workflowid", "")] = int(sent)
            cause = created.get(headers.get("ce_causationid", ""))
            if cause is not None and detail:
                handoff = (stamp - cause) * 1_000_000
                handoffs.record(handoff)
                step = headers.get("ce_type", "?").rsplit(".", 1)[-1]
                by_step.setdefault(step, LatencyRecorder()).record(handoff)
        tracker = LatencyRecorder()
        for message in read_range(
            self.kafka_config,
            self.completion_topic,
            before[self.completion_topic],
            after[self.completion_topic],
            group=group,
        ):
            stamp = message.timestamp()[1]
            payload = self.codec.decode(message.value()).payload
            if payload["to_state"] == "completed":
                workflow = (message.key() or b"").decode()
                analysis.done_ms[workflow] = stamp
            cause = created.get(payload["cause_event_id"])
            if cause is not None and detail:
                tracker.record((stamp - cause) * 1_000_000)
        if detail:
            analysis.handoff_ns = handoffs
            analysis.handoff_by_step_ns = by_step
            analysis.tracker_handoff_ns = tracker
        return analysis

    # -- cleanup ----------------------------------------------------------------------

    def close(self) -> list[str]:
        problems: list[str] = []
        if self._ticking is not None:
            self._ticking.set()
            time.sleep(0.5)
        stop_all(reversed(list(self.services.values())), problems)
        self._generator.close()
        if self._reader is not None:
            self._reader.close()
        if self.keep_logs is not None:
            self.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in self.scratch.glob("*.log"):
                shutil.copy(log, self.keep_logs / log.name)
        return problems + delete_suffixed(self.settings, self.suffix)


def warm_up(system: SagaSystem, *, progress: Progress, sagas: int = 20) -> None:
    """A few sagas end to end before anything is timed: groups joined, schemas cached."""
    progress(f"{system.name}: warming up with {sagas} sagas")
    result = run_probe(
        system,
        rate=10,
        duration_s=sagas / 10,
        label="warmup",
        detail=False,
        progress=lambda _: None,
        drain_timeout_s=180,
    )
    progress(
        f"{system.name}: {result.completed}/{sagas} warm-up sagas completed, e2e p50 "
        f"{result.e2e.p50_ms:,.0f} ms"
    )
    if result.completed < sagas:
        raise SagaBenchError(
            f"{system.name}: only {result.completed} of {sagas} warm-up sagas completed in 180 s"
        )


# --- profiling -------------------------------------------------------------------------


PLUMBING = frozenset(
    {
        # interpreter, threads and event loops
        "_run_module_as_main",
        "_run_code",
        "<module>",
        "main",
        "Thread._bootstrap",
        "Thread._bootstrap_inner",
        "Thread.run",
        "BaseEventLoop.run_until_complete",
        "BaseEventLoop.run_forever",
        "BaseEventLoop._run_once",
        "Handle._run",
        # faust and mode around the tracker's batch
        "Worker.execute_from_commandline",
        "WorkerThread.run",
        "ServiceThread._start_thread",
        "Service._execute_task",
        "Agent._execute_actor",
        "Tracker._build_app.<locals>.track",
        "Tracker.run_batch",
        "run_patched_tracker",
        # the agent runtime around one batch
        "run_agent",  # sagalog.run_agent
        "AgentWorker.run",
        "AgentWorker._iteration",
        "AgentWorker._process",
    }
)
"""Frames that only dispatch: a sample is charged to the first frame below them."""


def cost_breakdown(raw: Path, *, plumbing: frozenset[str] = PLUMBING) -> list[list[Any]]:
    """Samples by activity: the first frame under the dispatching ones, in % of samples.

    A sample whose every frame dispatches is charged to the innermost one and its
    line ("AgentWorker._iteration:335 (self)"): time inside a C call made there.
    """
    buckets: Counter[str] = Counter()
    total = 0
    if not raw.exists():
        return []
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        bucket = None
        for frame in frames:
            name, _, where = frame.partition(" (")
            if name not in plumbing:
                file = where.rstrip(")").rsplit(":", 1)[0].rsplit("/", 1)[-1]
                bucket = f"{name} ({file})"
                break
        if bucket is None:
            name, _, where = frames[-1].partition(" (")
            bucket = f"{name}:{where.rstrip(')').rsplit(':', 1)[-1]} (self)"
        buckets[bucket] += int(count_text)
        total += int(count_text)
    return [[name, round(100 * n / total, 1)] for name, n in buckets.most_common(12)]


def per_event_costs(
    profiler: Profiler, *, events_per_s: float, sample_rate_hz: float = 100
) -> dict[str, Any]:
    """The profile's summary with its shares turned into microseconds per consumed event.

    ``gil`` shares are of samples where the process held the GIL (Python running);
    ``active`` shares are of every non-idle thread (also waits inside C calls).
    """
    summary = profiler.summary()
    summary["breakdown"] = cost_breakdown(profiler.raw)
    summary["active_breakdown"] = cost_breakdown(profiler.active)
    samples, seconds = summary.get("samples", 0), float(summary.get("seconds", 0))
    events = events_per_s * seconds
    if not samples or not events:
        return summary

    def micros(rows: list[list[Any]], of: int) -> list[list[Any]]:
        return [
            [name, pct, round(pct / 100 * of / sample_rate_hz / events * 1e6, 1)]
            for name, pct in rows
        ]

    return {
        **summary,
        "events_per_s": round(events_per_s, 1),
        "gil_us_per_event": round(samples / sample_rate_hz / events * 1e6, 1),
        "breakdown_us": micros(summary["breakdown"], samples),
        "active_breakdown_us": micros(
            summary["active_breakdown"], int(summary.get("active_samples") or 0)
        ),
        "top_self_us": micros(summary.get("top_self", []), samples),
    }


# --- idle cost at a gate ----------------------------------------------------------------


@dataclass(frozen=True)
class IdleSample:
    cpu_pct: float
    rss_mb: float
    peak_rss_mb: float


def sample_processes(pids: Mapping[str, int], seconds: float) -> dict[str, IdleSample]:
    """CPU (100 = one core) of each process over ``seconds``, and its RSS at the end."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    found = {}
    for name, pid in pids.items():
        memory = memory_mb(pid)
        found[name] = IdleSample(
            cpu_pct=100 * (cpu_seconds(pid) - before[name]) / elapsed,
            rss_mb=memory["VmRSS"],
            peak_rss_mb=memory["VmHWM"],
        )
    return found


def measure_idle_at_gate(
    settings: ClientSettings,
    scratch: Path,
    *,
    waiting: int,
    partitions: int,
    idle_s: float,
    progress: Progress,
) -> dict[str, IdleSample]:
    """Every service's idle cost with ``waiting`` workflows at the gate (module docstring)."""
    lab = Lab(settings, scratch, partitions=partitions, progress=progress)
    services: list[Service] = []
    problems: list[str] = []
    try:
        lab.setup()
        flow = lab.root / "topology" / "flows" / "orders.v1.yaml"  # before the tracker reads it
        flow.write_text(named_for_bench(flow.read_text(), "orders", f"-{lab.suffix}"))
        lab.start_clock(lab.app_id)
        progress(f"idle {waiting:,}: preloading {waiting:,} workflows up to the gate")
        lab.preload(waiting)
        tracker = Service(
            name="tracker",
            env=service_env(
                prefixed(
                    "SAGALOG_TRACKER_",
                    project_dir=lab.root,
                    bootstrap_servers=lab.settings.bootstrap_servers,
                    schema_registry_url=lab.settings.schema_registry_url,
                    app_id=lab.app_id,
                    instance_id="a",
                    data_dir=scratch / "data" / "tracker",
                    gate_secret=SECRET,
                    clock="wall",
                    transitions_topic=lab.transitions_topic,
                    alerts_topic=lab.alerts_topic,
                    deadletter_topic=lab.deadletter_topic,
                )
            ),
            log=scratch / "tracker.log",
        ).start()
        services.append(tracker)
        _wait_transitions(lab, tracker, 4 * waiting, progress=progress)
        if not lab.wait_committed(lab.app_id, timeout=120):
            progress(f"idle {waiting:,}: WARNING the tracker's offsets are not all committed")
        ends = lab.high_watermarks(lab.topic)
        agents = _start_gate_agents(lab, scratch, ends, services)
        gateway, url = _start_gateway(lab, scratch, services)
        progress(f"idle {waiting:,}: agents rebuild their projections, the gateway its model")
        folded = {agent.name: _wait_for(agent, "hydrate", timeout=900) for agent in agents}
        health = _wait_http(gateway, f"{url}/healthz", timeout=900)
        progress(
            f"idle {waiting:,}: agents' projections: {folded}; gateway applied "
            f"{health.get('applied')} records"
        )
        time.sleep(5)  # let start-up work (registry look-ups, first commits) settle
        progress(f"idle {waiting:,}: sampling {len(services)} processes for {idle_s:g}s")
        return sample_processes({s.name: s.pid for s in services}, idle_s)
    finally:
        stop_all(reversed(services), problems)
        problems += lab.close()
        problems += delete_suffixed(lab.settings, lab.suffix)
        for problem in problems:
            progress(f"idle {waiting:,}: cleanup: {problem}")


def _wait_transitions(lab: Lab, tracker: Service, expected: int, *, progress: Progress) -> None:
    last, last_change, last_report = -1, time.monotonic(), time.monotonic()
    while True:
        tracker.check_alive("taking the preloaded workflows to the gate")
        count = lab.count(lab.transitions_topic)
        now = time.monotonic()
        if count >= expected:
            return
        if count != last:
            last, last_change = count, now
        if now - last_change > 180:
            raise SagaBenchError(
                f"tracker stalled at {count:,}/{expected:,} transitions\n{tracker.tail()}"
            )
        if now - last_report > 15:
            last_report = now
            progress(f"  {count:,}/{expected:,} transitions")
        time.sleep(1)


def _start_gate_agents(
    lab: Lab, scratch: Path, ends: Mapping[int, int], services: list[Service]
) -> list[Service]:
    """The orders flow's five agents, their groups' offsets at ``ends`` (nothing to handle)."""
    agents = []
    for step in range(1, STEPS + 1):
        name = agent_name("orders", step, f"-{lab.suffix}")
        committer = Consumer(lab.settings.kafka_config(**{"group.id": f"sagalog-agent-{name}"}))
        offsets = [TopicPartition(lab.topic, p, end) for p, end in ends.items()]
        committer.commit(offsets=offsets, asynchronous=False)
        committer.close()
        agent = Service(
            name=f"agent{step}",
            env=service_env(
                prefixed(
                    "BENCH_SAGA_AGENT_",
                    chain="orders",
                    name_suffix=f"-{lab.suffix}",
                    project_dir=lab.root,
                    bootstrap_servers=lab.settings.bootstrap_servers,
                    schema_registry_url=lab.settings.schema_registry_url,
                    instance_id="a",
                    data_dir=scratch / "data" / f"agent{step}",
                    deadletter_topic=lab.deadletter_topic,
                    log_level="INFO",  # nothing is handled; the hydrate line is needed
                )
            ),
            log=scratch / f"agent{step}.log",
            module="tests.bench.saga_agents",
            args=("--step", str(step)),
        ).start()
        services.append(agent)
        agents.append(agent)
    return agents


def _start_gateway(lab: Lab, scratch: Path, services: list[Service]) -> tuple[Service, str]:
    from demo.fleet import free_port

    port = free_port()
    gateway = Service(
        name="gateway",
        env=service_env(
            prefixed(
                "GATEWAY_",
                project_dir=lab.root,
                bootstrap_servers=lab.settings.bootstrap_servers,
                schema_registry_url=lab.settings.schema_registry_url,
                port=port,
                api_keys=f"bench-{lab.suffix}",
                gate_secret=SECRET,
                tracker_app_id=lab.app_id,
                transitions_topic=lab.transitions_topic,
                data_dir=scratch / "data" / "gateway",
                instance_id=f"bench-{lab.suffix}",
            )
        ),
        log=scratch / "gateway.log",
        module="sagalog.services.gateway",
    ).start()
    services.append(gateway)
    return gateway, f"http://127.0.0.1:{port}"


def _wait_for(service: Service, action: str, *, timeout: float) -> str:
    """The message of ``service``'s first log line with ``action``, once there is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service.check_alive(f"waiting for {action}")
        found = service.actions(action)
        if found:
            return str(found[0].get("message"))
        time.sleep(1)
    raise SagaBenchError(f"{service.name}: no {action!r} line in {timeout:g}s\n{service.tail()}")


def _wait_http(service: Service, url: str, *, timeout: float) -> dict[str, Any]:
    """The JSON body of ``url`` once it answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service.check_alive(f"waiting for {url}")
        with (
            contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
            urllib.request.urlopen(url, timeout=5) as reply,
        ):
            return dict(json.load(reply))
        time.sleep(1)
    raise SagaBenchError(f"{service.name}: {url} not ready in {timeout:g}s\n{service.tail()}")


# --- everything ---------------------------------------------------------------------------


@dataclass
class SagaBenchResult:
    results: dict[str, Any]
    rows: list[tuple[str, str]]


LOAD_FRACTIONS = (0.25, 0.5, 0.8)


def measure_sagas(
    settings: ClientSettings,
    *,
    partitions: int,
    duration_s: float,
    probe_s: float,
    latency_s: float,
    start_rate: float,
    rate: float | None,
    baseline: bool,
    baseline_start_rate: float,
    profile_dir: Path | None,
    baseline_shared: bool = False,
    tick_hz: float = 0.0,
    tracker_fetch_wait_ms: int = 0,
    cohosted: bool = False,
    progress: Progress = print,
) -> SagaBenchResult:
    """Sagalog's sustained maximum and latency by load, the baseline, and the ratio."""
    results: dict[str, Any] = {"sagas_measured_at": _now()}
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="sagalog-saga-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        system = SagalogSystem(
            settings, scratch / "sagalog", partitions=partitions, progress=progress
        )
        system.scratch.mkdir()
        if profile_dir is not None:
            system.keep_logs = profile_dir / "logs"
        system.tracker_fetch_wait_ms = tracker_fetch_wait_ms
        system.cohosted = cohosted
        results["sagas_agents"] = "cohosted" if cohosted else "alone"
        if tracker_fetch_wait_ms:
            results["sagas_tracker_fetch_wait_ms"] = tracker_fetch_wait_ms
            rows.append(
                (
                    "NOTE",
                    f"tracker run with fetch_max_wait_ms={tracker_fetch_wait_ms} (an experiment)",
                )
            )
        try:
            if tick_hz:
                results["sagas_tick_hz"] = tick_hz
                rows.append(("NOTE", f"clock topic ticked at {tick_hz:g} Hz (an experiment)"))
            _measure_sagalog(
                system,
                duration_s,
                probe_s,
                latency_s,
                start_rate,
                rate,
                profile_dir,
                tick_hz,
                progress,
                results,
                rows,
            )
        except Exception as exc:
            results["sagas_error"] = str(exc)
            rows.append(("sagas", f"FAILED: {_first_line(exc)}"))
            progress(f"saga bench FAILED: {exc}")
        finally:
            for problem in system.close():
                progress(f"{system.suffix}: cleanup: {problem}")
        if baseline:
            from .baseline_chain import measure_baseline

            for one_topic in (False, True) if baseline_shared else (False,):
                found = measure_baseline(
                    settings,
                    scratch / ("baseline-shared" if one_topic else "baseline"),
                    partitions=partitions,
                    duration_s=duration_s,
                    probe_s=probe_s,
                    start_rate=baseline_start_rate,
                    progress=progress,
                    shared=one_topic,
                )
                results |= found.results
                rows += found.rows
            sagas, raw = results.get("sagas_per_s"), results.get("baseline_sagas_per_s")
            results["sagas_ratio"] = round(sagas / raw, 3) if sagas and raw else None
            if results["sagas_ratio"] is not None:
                rows.append(("sagas ratio", f"{results['sagas_ratio']:.3f} of the baseline"))
            shared = results.get("baseline_shared_sagas_per_s")
            if shared and raw:
                results["baseline_shared_ratio"] = round(shared / raw, 3)
                rows.append(
                    (
                        "shared topic ratio",
                        f"{results['baseline_shared_ratio']:.3f}: the chain on one shared "
                        "topic against the chain on a topic per hop",
                    )
                )
    return SagaBenchResult(results, rows)


def _measure_sagalog(
    system: SagalogSystem,
    duration_s: float,
    probe_s: float,
    latency_s: float,
    start_rate: float,
    rate: float | None,
    profile_dir: Path | None,
    tick_hz: float,
    progress: Progress,
    results: dict[str, Any],
    rows: list[tuple[str, str]],
) -> None:
    results.update(sagas_per_s=None, sagas_error=None)
    system.setup()
    hosted = "in one process" if system.cohosted else "each in its own process"
    progress(f"{system.suffix}: project ready; starting the tracker and {STEPS} agents {hosted}")
    system.start()
    if tick_hz:
        system.start_ticks(tick_hz)
    warm_up(system, progress=progress)
    if rate is None:
        rate, probes = find_max_rate(
            system, start_rate=start_rate, probe_s=probe_s, probes=7, cap=5000, progress=progress
        )
    else:
        probes = []
    if rate is None:
        raise SagaBenchError(f"not even {start_rate:g} sagas/s was sustained (see saga_probes)")
    profilers: dict[str, Profiler] = {}
    recorders: list[tuple[BrokerProfiler, threading.Thread]] = []

    def profile() -> None:
        """py-spy the tracker and agent 3, and JFR the broker when it runs here, through
        the middle of each confirmation run."""
        if profile_dir is None:
            return
        for previous in profilers.values():
            previous.wait()
        for _, thread in recorders:
            thread.join()
        recorders.clear()
        profile_dir.mkdir(parents=True, exist_ok=True)
        seconds = min(30.0, duration_s / 2)
        pids = system.pids()
        for name in ("tracker", system.profiled_agent):
            profilers[name] = Profiler(profile_dir / f"saga-{name}", pids[name], seconds)
        broker = stack_pids().get("kafka")
        if broker is not None:
            recorder = BrokerProfiler(profile_dir / "saga-broker.jfr", broker, seconds)
            recorders.append((recorder, threading.Thread(target=recorder.record, daemon=True)))

        def start() -> None:
            for profiler in profilers.values():
                profiler.start()
            for _, thread in recorders:
                thread.start()

        threading.Timer(duration_s / 4, start).start()

    chosen, runs, confirmed = confirm_rate(
        system, rate, duration_s=duration_s, progress=progress, on_load_start=profile
    )
    found = MaxRate(chosen, [*probes, *runs[:-1]] if confirmed else [*probes, *runs], confirmed)
    for name, profiler in profilers.items():  # those of the last run: the sustained one
        profiler.wait()
        at = runs[-1].load.achieved_per_s * system.per_saga  # both consume every event
        found.profiles[name] = {
            "run": runs[-1].label,
            **per_event_costs(profiler, events_per_s=at),
        }
    results |= found.as_dict("sagas")
    results["saga_profiles"] = found.profiles
    for recorder, thread in recorders:
        thread.join()
        results["saga_broker_profile"] = {"run": runs[-1].label, **recorder.summary()}
    results["sagas_processes"] = {
        "tracker": "python -m sagalog.services.tracker (wall clock)",
        **{
            name: "python -m tests.bench.saga_agents "
            + " ".join(f"--step {s}" for s in steps)
            + f" ({', '.join(system.agent_name(s) for s in steps)})"
            for name, steps in system.agent_processes().items()
        },
    }
    for probe in probes:
        rows.append(_probe_row(f"  probe {probe.load.target_per_s:,.0f}/s", probe))
    if confirmed is None:
        rows.append(("sagas/s", f"FAILED: no {duration_s:g}s run was sustained"))
        for run in runs:
            rows.append(_probe_row(f"  {run.label}", run))
        return
    rows.append(
        (
            "sagas/s (sustained)",
            f"{confirmed.steady_per_s:,.1f} completed/s for {duration_s:g}s at "
            f"{confirmed.load.achieved_per_s:,.1f} arrivals/s, e2e p50 "
            f"{confirmed.e2e.p50_ms:,.0f} / p99 {confirmed.e2e.p99_ms:,.0f} ms",
        )
    )
    rows.append(("  CPU meanwhile", cpu_text(confirmed)))
    rows.append(("  CPU per saga", cpu_per_saga_text(confirmed)))
    rows.append(("  broker per saga", broker_text(confirmed)))
    assert chosen is not None  # confirmed implies a rate
    by_load: dict[str, Any] = {}
    for fraction in LOAD_FRACTIONS:
        run = run_probe(
            system,
            rate=round(chosen * fraction, 1),
            duration_s=latency_s,
            label=f"load{int(fraction * 100)}",
            detail=True,
            progress=progress,
        )
        by_load[f"{fraction:.0%}"] = {"fraction": fraction, **run.as_dict()}
        assert run.handoff is not None and run.tracker_handoff is not None
        rows.append(
            (
                f"handoff at {fraction:.0%} ({run.load.achieved_per_s:,.0f} sagas/s)",
                f"p50 {run.handoff.p50_ms:.0f}  p99 {run.handoff.p99_ms:.0f}  p99.9 "
                f"{run.handoff.p999_ms:.0f} ms (n={run.handoff.count:,}); tracker p50 "
                f"{run.tracker_handoff.p50_ms:.0f} p99 {run.tracker_handoff.p99_ms:.0f} ms; "
                f"e2e p50 {run.e2e.p50_ms:.0f} ms"
                + ("" if run.sustained else f"  [NOT SUSTAINED: {run.verdict}]"),
            )
        )
    results["latency_by_load"] = by_load
    for name, summary in found.profiles.items():
        rows.append(
            (
                f"profile {name} (GIL)",
                f"{summary.get('gil_us_per_event', '?')} us/event held the GIL "
                f"({summary.get('samples', 0):,} samples)",
            )
        )
        for function, pct, micros in summary.get("breakdown_us", [])[:3]:
            rows.append((f"  {micros:7.1f} us {pct:5.1f}%", function))
    broker_profile = results.get("saga_broker_profile")
    if broker_profile is not None:
        rows.append(
            (
                "profile broker (JFR)",
                f"{broker_profile.get('samples', 0):,} samples of its Java threads "
                + "; ".join(broker_profile.get("errors", [])),
            )
        )
        for kind, share in list(broker_profile.get("shares", {}).items())[:8]:
            rows.append((f"  {share:6.1%}", kind))


def stack_pids() -> dict[str, int]:
    """The local stack's broker and registry, when they run here (``sagalog dev up``):
    on a co-located broker their CPU is part of what a saga costs."""
    layout = StackLayout(state_dir=DevStackSettings().state_dir)
    pids = {}
    for component in ("kafka", "registry"):
        record = read_pid_record(layout.pid_file(component=component))
        if record is not None and is_running(record.pid):
            pids[component] = record.pid
    return pids


def _probe_row(name: str, probe: ProbeResult) -> tuple[str, str]:
    return (
        name,
        f"{probe.steady_per_s:,.1f}/s completed, e2e p50 {probe.e2e.p50_ms:,.0f} ms: "
        f"{probe.verdict}",
    )


def cpu_per_saga_text(probe: ProbeResult) -> str:
    costs = probe.cpu_us_per_saga
    agents = sum(us for name, us in costs.items() if name.startswith("agent"))
    named = ", ".join(f"{name} {us:,.0f}" for name, us in costs.items())
    return f"{named} us (agents together {agents:,.0f} us)" if agents else f"{named} us"


def broker_text(probe: ProbeResult) -> str:
    broker = probe.broker
    if broker is None:
        return "not measured (the stack's broker serves no metrics: `sagalog dev down`, `up`)"
    top = ", ".join(
        f"{api} {n:.1f}" for api, n in list(broker["requests_per_saga_by_api"].items())[:6]
    )
    return (
        f"{broker['requests_per_saga']:.1f} requests ({top}), "
        f"{broker['records_in_per_saga']:.1f} records, {broker['bytes_in_per_saga']:,} bytes in"
    )


def cpu_text(probe: ProbeResult) -> str:
    shares = ", ".join(f"{name} {pct:.0f}%" for name, pct in probe.cpu_pct.items())
    return f"{shares} (of one core); machine {probe.machine_busy_pct:.0f}% busy"


def measure_idle(
    settings: ClientSettings,
    *,
    sizes: Iterable[int],
    partitions: int,
    idle_s: float,
    progress: Progress = print,
) -> SagaBenchResult:
    """``idle_cpu_pct`` and ``idle_rss_mb`` per service, for each number waiting at the gate."""
    cpu: dict[str, dict[str, float]] = {}
    rss: dict[str, dict[str, float]] = {}
    peak: dict[str, dict[str, float]] = {}
    errors: dict[str, str] = {}
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="sagalog-idle-bench-") as scratch_dir:
        for size in sizes:
            scratch = Path(scratch_dir) / f"idle-{size}"
            scratch.mkdir()
            try:
                found = measure_idle_at_gate(
                    settings,
                    scratch,
                    waiting=size,
                    partitions=partitions,
                    idle_s=idle_s,
                    progress=progress,
                )
            except Exception as exc:
                errors[str(size)] = str(exc)
                rows.append((f"idle, {size:,} waiting", f"FAILED: {_first_line(exc)}"))
                progress(f"idle {size:,} FAILED: {exc}")
                continue
            cpu[str(size)] = {name: round(s.cpu_pct, 2) for name, s in found.items()}
            rss[str(size)] = {name: round(s.rss_mb, 1) for name, s in found.items()}
            peak[str(size)] = {name: round(s.peak_rss_mb, 1) for name, s in found.items()}
            for name, sample in found.items():
                rows.append(
                    (
                        f"idle {name}, {size:,} at the gate",
                        f"CPU {sample.cpu_pct:5.2f}% over {idle_s:g}s, RSS {sample.rss_mb:6.1f} MB "
                        f"(peak {sample.peak_rss_mb:,.0f})",
                    )
                )
    results = {
        "idle_measured_at": _now(),
        "idle_cpu_pct": cpu,
        "idle_rss_mb": rss,
        "idle_peak_rss_mb": peak,
        "idle_seconds": idle_s,
        "idle_error": errors or None,
    }
    return SagaBenchResult(results, rows)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def run_patched_tracker() -> int:
    """The saga tracker with aiokafka's ``fetch_max_wait_ms`` set from ``FETCH_WAIT_ENV``.

    An experiment, not a fix: faust-streaming 0.15's aiokafka driver creates its
    consumer with ``fetch_max_wait_ms=1500``. A fetch that names only partitions with
    nothing new (the idle clock partitions, while every workflow partition still has
    unconsumed records) is held by the broker that long, and aiokafka sends no other
    fetch to that broker meanwhile: the tracker stalls for up to 1.5 s under load.
    """
    import aiokafka

    wait_ms = int(os.environ[FETCH_WAIT_ENV])
    original = aiokafka.AIOKafkaConsumer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["fetch_max_wait_ms"] = wait_ms
        original(self, *args, **kwargs)

    aiokafka.AIOKafkaConsumer.__init__ = init
    from sagalog.services.tracker.__main__ import main

    return main()


if __name__ == "__main__":
    if sys.argv[1:] != ["patched-tracker"]:
        raise SystemExit("usage: python -m tests.bench.sagas patched-tracker (see the docstring)")
    sys.exit(run_patched_tracker())
