"""The saga tracker under load: live throughput, restore speed, idle cost at a gate.

Everything runs on the real broker, the tracker as its own process (``python -m
sagalog.services.tracker``, virtual clock) in a throwaway project whose topics, app ids and
registry subjects all carry one unique suffix, deleted at the end even on failure.

1. **Live throughput.** ``N`` workflows of the five-step test flow, each with its
   start event and the completions of its first three steps (4 input events per
   workflow, in workflow order) are preloaded *before* the worker starts; the worker
   takes every workflow to the gate (``pending_approval``). The figure is input
   events / (CreateTime of the last ``StateTransition`` - CreateTime of the first):
   the worker's start-up is left out, its own producer stamps the times. The run
   counts only when every workflow reached ``pending_approval``.
2. **Restore.** The worker is stopped (SIGTERM) and a new one with the same app id
   and an *empty* data dir starts: faust rebuilds every table from its changelog.
   ``restore_records_per_s`` = changelog records / (its ``tables_ready`` time - the
   ``tables_ready`` time of a worker of an app with empty changelogs), the baseline
   being taken before the preload (a second start of that empty app, so that its
   topics and group already exist, as they do for the restart).
3. **Idle cost.** With the ``N`` workflows waiting at the gate and the worker caught
   up, its CPU time (``/proc/<pid>/stat``) over ``idle_s`` seconds and its RSS.

Optionally (``profile``) the live worker is sampled with py-spy for 20 s: a
flamegraph (svg), the raw collapsed stacks, and the top functions by self time.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from tests.processes import ServiceProcess

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders, header_dict, new_event_id
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.validation import to_avro_datum
from sagalog.settings import ClientSettings
from sagalog.topic_names import changelog_topic
from sagalog.topology.apply import TopologyClient
from sagalog.topology.loader import load_topology
from sagalog.tracker.tables import Table
from sagalog.tracker.ticks import clock_topic

REPO = Path(__file__).resolve().parents[2]
FLOW_FILE = REPO / "tests" / "integration" / "flows" / "orders.v1.yaml"
SECRET = "bench-gate-secret-0123456789abcdef"
T0 = 1_800_000_000_000  # the virtual clock's start
TABLES = tuple(Table)
GATE_STATE = "pending_approval"

PROCUREMENT = [
    "procurement.v1.RequestSubmitted",
    "procurement.v1.RequestClassified",
    "procurement.v1.PoliciesRetrieved",
    "procurement.v1.RiskScored",
    "procurement.v1.BudgetReserved",
    "procurement.v1.BudgetReleased",
    "procurement.v1.PurchaseOrderCreated",
    "procurement.v1.PurchaseOrderCancelled",
    "procurement.v1.VendorNotified",
    "procurement.v1.CorrectionNoticeSent",
    "sagalog.v1.StepFailed",
    "sagalog.v1.GateOpened",
    "sagalog.v1.GateDecided",
    "sagalog.v1.CompensationRequested",
    "sagalog.v1.CompensationCompleted",
    "sagalog.v1.EffectRecorded",
]

TOPOLOGY = """
ignore: ["*"]
topics:
  orders.events.{s}:
    partitions: {p}
    retention: forever
    schemas: [%s]
  transitions.{s}:
    partitions: {p}
    schemas: [sagalog.v1.StateTransition]
  alerts.{s}:
    partitions: 1
    schemas: [sagalog.v1.TrackerAlert]
  deadletter.{s}:
    partitions: 1
    schemas: []
""".replace("%s", ", ".join(PROCUREMENT))

NOW = "2027-01-15T08:00:00Z"
INPUTS: list[tuple[str, dict[str, Any]]] = [  # per workflow, in flow order, up to the gate
    (
        "procurement.v1.RequestSubmitted",
        {
            "request_id": "PR-1",
            "requester": "ana@example.com",
            "department": "it",
            "title": "Laptops",
            "description": "ten laptops",
            "amount": "100.00",
            "currency": "EUR",
            "vendor": "Acme",
            "submitted_at": NOW,
        },
    ),
    (
        "procurement.v1.BudgetReserved",
        {"reservation_id": "R-1", "cost_center": "it", "amount": "100.00", "currency": "EUR"},
    ),
    (
        "procurement.v1.RequestClassified",
        {
            "request_id": "PR-1",
            "category": "hardware",
            "confidence": 0.9,
            "extracted": {},
            "classifier": "bench",
        },
    ),
    (
        "procurement.v1.PoliciesRetrieved",
        {"request_id": "PR-1", "documents": [], "retriever": "bench"},
    ),
]
TRANSITIONS_PER_WORKFLOW = 4
"""initiated->running, running->running (twice), running->pending_approval."""


class TrackerBenchError(Exception):
    """A phase did not finish; the message says which and why (with a log excerpt)."""


# --- a worker process -------------------------------------------------------------------


@dataclass
class Worker(ServiceProcess):
    """One ``python -m sagalog.services.tracker`` process; its stdout and stderr go to ``log``."""

    module: str = "sagalog.services.tracker"
    name: str = "tracker"

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM and wait; killed (and an error raised) if it does not exit in time."""
        try:
            return super().stop(timeout)
        except subprocess.TimeoutExpired:
            raise TrackerBenchError(
                f"{self.name}: no exit within {timeout:g}s of SIGTERM; killed\n{self.tail()}"
            ) from None

    def lines(self) -> list[dict[str, Any]]:
        """Its JSON log lines (faust's own plain lines are skipped)."""
        found: list[dict[str, Any]] = []
        if not self.log.exists():
            return found
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    found.append(json.loads(line))
        return found

    def actions(self, action: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("action") == action]

    def wait_action(self, action: str, *, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.actions(action)
            if found:
                return found[0]
            self.check_alive(f"waiting for {action}")
            time.sleep(0.1)
        raise TrackerBenchError(
            f"{self.name}: no {action!r} log line within {timeout:g}s\n{self.tail()}"
        )

    def check_alive(self, doing: str) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise TrackerBenchError(
                f"{self.name} exited with status {self.process.returncode} while {doing}\n"
                f"{self.tail()}"
            )

    def tail(self, lines: int = 30) -> str:
        if not self.log.exists():
            return f"({self.log} is missing)"
        text = self.log.read_text(errors="replace").splitlines()[-lines:]
        return f"--- last {len(text)} lines of {self.log} ---\n" + "\n".join(text)


# --- /proc ----------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of every thread of ``pid`` so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of ``pid`` in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine, every core, from ``/proc/stat``."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


@dataclass(frozen=True)
class IdleCost:
    waiting: int
    seconds: float
    cpu_pct: float
    rss_mb: float
    peak_rss_mb: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "cpu_pct": round(self.cpu_pct, 2),
            "rss_mb": round(self.rss_mb, 1),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "seconds": round(self.seconds, 1),
        }


def sample_idle(worker: Worker, *, waiting: int, seconds: float) -> IdleCost:
    before, started = cpu_seconds(worker.pid), time.monotonic()
    time.sleep(seconds)
    worker.check_alive("measuring its idle cost")
    after, ended = cpu_seconds(worker.pid), time.monotonic()
    memory = memory_mb(worker.pid)
    return IdleCost(
        waiting=waiting,
        seconds=ended - started,
        cpu_pct=100 * (after - before) / (ended - started),
        rss_mb=memory["VmRSS"],
        peak_rss_mb=memory["VmHWM"],
    )


# --- the throwaway project -------------------------------------------------------------


@dataclass
class TransitionSummary:
    total: int
    to_gate: int
    workflows_at_gate: int
    first_ms: int
    last_ms: int
    states: Counter[str] = field(default_factory=Counter)


class Lab:
    """A project with unique topic names, the test flow, and tracker workers on it."""

    def __init__(
        self,
        settings: ClientSettings,
        scratch: Path,
        *,
        partitions: int,
        progress: Callable[[str], None],
    ) -> None:
        self.suffix = f"trkbench{uuid.uuid4().hex[:10]}"
        self.scratch = scratch
        self.root = scratch / "project"
        self.settings = settings.model_copy(update={"project_dir": str(self.root)})
        self.partitions = partitions
        self.progress = progress
        self.app_id = f"saga-tracker-{self.suffix}"
        self.empty_app_id = f"saga-tracker-empty-{self.suffix}"
        self.topic = f"orders.events.{self.suffix}"
        self.transitions_topic = f"transitions.{self.suffix}"
        self.alerts_topic = f"alerts.{self.suffix}"
        self.deadletter_topic = f"deadletter.{self.suffix}"
        self.workers: list[Worker] = []
        self.admin = AdminClient(self.settings.kafka_config())
        self._reader: Consumer | None = None

    # -- setup -------------------------------------------------------------------

    def setup(self) -> Lab:
        shutil.copytree(REPO / "schemas", self.root / "schemas")
        flows = self.root / "topology" / "flows"
        flows.mkdir(parents=True)
        (self.root / "topology" / "topics.yaml").write_text(
            TOPOLOGY.replace("{s}", self.suffix).replace("{p}", str(self.partitions))
        )
        (flows / FLOW_FILE.name).write_text(FLOW_FILE.read_text().replace("{s}", self.suffix))
        catalog = SchemaCatalog.load(self.root / "schemas")
        client = TopologyClient(self.settings, catalog)
        topology = load_topology(self.root / "topology", known_schemas=catalog)
        client.apply(client.plan(topology), report=lambda _: None)
        self.catalog = catalog
        self.codec = EventCodec(catalog=catalog, registry=SchemaRegistry(self.settings))
        return self

    def worker(self, name: str, app_id: str, data_dir: Path) -> Worker:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO / "services"), os.environ.get("PYTHONPATH", "")) if p
            ),
            "SAGALOG_TRACKER_PROJECT_DIR": str(self.root),
            "SAGALOG_TRACKER_BOOTSTRAP_SERVERS": self.settings.bootstrap_servers,
            "SAGALOG_TRACKER_SCHEMA_REGISTRY_URL": self.settings.schema_registry_url,
            "SAGALOG_TRACKER_APP_ID": app_id,
            "SAGALOG_TRACKER_INSTANCE_ID": name,
            "SAGALOG_TRACKER_DATA_DIR": str(data_dir),
            "SAGALOG_TRACKER_GATE_SECRET": SECRET,
            "SAGALOG_TRACKER_CLOCK": "virtual",
            "SAGALOG_TRACKER_TRANSITIONS_TOPIC": self.transitions_topic,
            "SAGALOG_TRACKER_ALERTS_TOPIC": self.alerts_topic,
            "SAGALOG_TRACKER_DEADLETTER_TOPIC": self.deadletter_topic,
        }
        worker = Worker(name=name, env=env, log=self.scratch / f"{name}.log").start()
        self.workers.append(worker)
        return worker

    def start_clock(self, app_id: str) -> None:
        """Create ``<app id>-clock`` and tick T0 on every partition: virtual time starts there.

        Done before a worker starts, as the integration harness does: a worker creating
        the clock topic itself may read its watermarks before the partitions have a
        leader (``NOT_LEADER_FOR_PARTITION``) and exit.
        """
        clock = clock_topic(app_id)
        futures = self.admin.create_topics([NewTopic(clock, self.partitions)])
        for future in futures.values():
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
        producer = Producer(self.settings.producer_config())
        for partition in range(self.partitions):
            producer.produce(clock, value=str(T0).encode(), partition=partition)
        if producer.flush(30):
            raise TrackerBenchError(f"setup: the T0 tick to {clock} was not delivered")

    def preload(self, workflows: int) -> int:
        """``workflows`` x the 4 input events, in workflow order; how many were delivered."""
        values = {}
        for event_type, body in INPUTS:
            definition = self.catalog[event_type].definition
            datum = to_avro_datum(definition, body, event_type=event_type)
            values[event_type] = self.codec.encode(self.topic, event_type, datum)
        producer = Producer(
            self.settings.producer_config(
                **{
                    "enable.idempotence": True,
                    "linger.ms": 20,
                    "compression.type": "lz4",
                    "queue.buffering.max.messages": 1_000_000,
                }
            )
        )
        errors = 0

        def delivered(error: Any, _message: Any) -> None:
            nonlocal errors
            if error is not None:
                errors += 1

        sent = 0
        for i in range(workflows):
            workflow_id = f"wf-{i:07d}"
            key = workflow_id.encode()
            for event_type, _ in INPUTS:
                headers = EventHeaders(
                    id=new_event_id(),
                    type=event_type,
                    source="bench/agents",
                    workflow_id=workflow_id,
                ).to_kafka()
                while True:
                    try:
                        producer.produce(
                            self.topic,
                            key=key,
                            value=values[event_type],
                            headers=headers,
                            on_delivery=delivered,
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                sent += 1
            producer.poll(0)
        unsent = producer.flush(120)
        if errors or unsent:
            raise TrackerBenchError(
                f"preload: {errors} of {sent} events refused, {unsent} unacknowledged"
            )
        return sent

    # -- observing -----------------------------------------------------------------

    @property
    def reader(self) -> Consumer:
        if self._reader is None:
            self._reader = Consumer(
                self.settings.kafka_config(
                    **{"group.id": f"bench-reader-{self.suffix}", "enable.auto.commit": False}
                )
            )
        return self._reader

    def high_watermarks(self, topic: str) -> dict[int, int]:
        partitions = self.reader.list_topics(topic, timeout=15).topics[topic].partitions
        return {
            p: self.reader.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in partitions
        }

    def count(self, topic: str) -> int:
        """Offsets in ``topic``, low to high watermark: its records and, where it is
        written in transactions, one commit marker per transaction and partition."""
        partitions = self.reader.list_topics(topic, timeout=15).topics[topic].partitions
        total = 0
        for p in partitions:
            low, high = self.reader.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            total += high - low
        return total

    def changelog_counts(self, app_id: str) -> dict[str, int]:
        topics = self.reader.list_topics(timeout=15).topics
        return {
            table: self.count(name)
            for table in TABLES
            if (name := changelog_topic(app_id, table)) in topics
        }

    def read_transitions(self, *, expected: int = 0) -> TransitionSummary:
        """Every committed transition: read until at least ``expected`` came, then
        until the topic is quiet for 2 s (an extra transition is a misbehaviour).

        Counted, not matched against the end offsets: a transactional partition ends
        in a commit marker, which a read_committed consumer steps over and never hands
        out, so waiting for a record at ``end - 1`` waited forever (issue 23's
        before-run: 80,000 transitions read, then "nothing for 60 s").
        """
        topic = self.transitions_topic
        consumer = Consumer(
            self.settings.kafka_config(
                **{"group.id": f"bench-reader-{self.suffix}", "enable.auto.commit": False}
            )
        )
        partitions = [TopicPartition(topic, p, 0) for p in self.high_watermarks(topic)]
        consumer.assign(partitions)
        states: Counter[str] = Counter()
        at_gate: set[str] = set()
        first, last, total = None, None, 0
        try:
            idle_since = time.monotonic()
            while True:
                messages = consumer.consume(2000, 1.0 if total < expected else 2.0)
                if not messages and total >= expected:
                    break
                if not messages and time.monotonic() - idle_since > 60:
                    raise TrackerBenchError(
                        f"reading {topic}: nothing for 60 s, {total:,} of {expected:,} read"
                    )
                for message in messages:
                    if message.error() is not None:
                        continue
                    idle_since = time.monotonic()
                    total += 1
                    stamp = message.timestamp()[1]
                    first = stamp if first is None else min(first, stamp)
                    last = stamp if last is None else max(last, stamp)
                    to_state = self.codec.decode(message.value()).payload["to_state"]
                    states[to_state] += 1
                    if to_state == GATE_STATE:
                        workflow = header_dict(message.headers()).get("ce_workflowid", "")
                        at_gate.add(workflow)
        finally:
            consumer.close()
        return TransitionSummary(
            total=total,
            to_gate=states[GATE_STATE],
            workflows_at_gate=len(at_gate),
            first_ms=first or 0,
            last_ms=last or 0,
            states=states,
        )

    def wait_committed(self, app_id: str, *, timeout: float) -> bool:
        """Whether ``app_id`` committed every workflow-topic offset (its echoes included).

        Up to one short of the end: the tracker's echoes are written in transactions,
        so a partition ends in a commit marker, which no consumer is handed and so none
        commits past (the check waited out its timeout on every run).
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ends = self.high_watermarks(self.topic)
            request = ConsumerGroupTopicPartitions(
                app_id, [TopicPartition(self.topic, p) for p in ends]
            )
            future = self.admin.list_consumer_group_offsets([request])[app_id]
            with contextlib.suppress(KafkaException):
                committed = {tp.partition: tp.offset for tp in future.result(15).topic_partitions}
                if all(committed.get(p, -1) >= end - 1 for p, end in ends.items()):
                    return True
            time.sleep(0.5)
        return False

    # -- cleanup -------------------------------------------------------------------

    def close(self) -> list[str]:
        """Stop every worker, delete this lab's topics, groups and subjects; what went wrong."""
        problems = []
        for worker in self.workers:
            try:
                worker.stop(30)
            except Exception as exc:
                problems.append(f"stopping {worker.name}: {exc}")
                worker.kill()
        if self._reader is not None:
            self._reader.close()
        try:
            groups = [
                g.group_id
                for g in self.admin.list_consumer_groups().result(15).valid
                if self.suffix in g.group_id
            ]
            if groups:
                for future in self.admin.delete_consumer_groups(
                    groups, request_timeout=15
                ).values():
                    with contextlib.suppress(KafkaException):
                        future.result(15)
        except Exception as exc:
            problems.append(f"deleting groups: {exc}")
        try:
            mine = [t for t in self.admin.list_topics(timeout=15).topics if self.suffix in t]
            if mine:
                for future in self.admin.delete_topics(mine, operation_timeout=30).values():
                    future.result(30)
        except Exception as exc:
            problems.append(f"deleting topics: {exc}")
        try:
            registry = SchemaRegistryClient(self.settings.registry_config())
            for subject in registry.get_subjects():
                if self.suffix in subject:
                    registry.delete_subject(subject)
                    registry.delete_subject(subject, permanent=True)
        except Exception as exc:
            problems.append(f"deleting subjects: {exc}")
        return problems


# --- profiling --------------------------------------------------------------------------


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profiler:
    """py-spy on a live worker for ``seconds``.

    Two views, each from its own sampler (``--nonblocking``: the worker is never
    paused): ``--gil``, the thread holding the GIL, i.e. where Python spends CPU
    (PREFIX.svg flamegraph and PREFIX.raw.txt), and every non-idle thread
    (PREFIX.active.raw.txt), which also shows threads waiting inside C calls (the
    producer's flush). A ``py-spy dump`` half-way is kept in PREFIX.dump.txt.
    """

    def __init__(self, prefix: Path, pid: int, seconds: float) -> None:
        self.prefix = prefix
        self.pid = pid
        self.seconds = seconds
        self.svg = Path(f"{prefix}.svg")
        self.raw = Path(f"{prefix}.raw.txt")
        self.active = Path(f"{prefix}.active.raw.txt")
        self.dump = Path(f"{prefix}.dump.txt")
        self.processes: list[subprocess.Popen[bytes]] = []
        self.errors: list[str] = []

    def start(self) -> None:
        binary = py_spy()
        if binary is None:
            self.errors.append("py-spy is not installed (.venv/bin/pip install py-spy)")
            return
        common = ["--pid", str(self.pid), "--duration", str(int(self.seconds)), "--nonblocking"]
        views: tuple[tuple[Path, str, list[str]], ...] = (
            (self.svg, "flamegraph", ["--gil"]),
            (self.raw, "raw", ["--gil"]),
            (self.active, "raw", []),
        )
        for out, fmt, extra in views:
            self.processes.append(
                subprocess.Popen(
                    [binary, "record", "-o", str(out), "--format", fmt, *extra, *common],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
        threading.Timer(self.seconds / 2, self._dump, args=(binary,)).start()

    def _dump(self, binary: str) -> None:
        with contextlib.suppress(Exception):
            done = subprocess.run(
                [binary, "dump", "--pid", str(self.pid), "--nonblocking"],
                capture_output=True,
                timeout=30,
            )
            self.dump.write_bytes(done.stdout + done.stderr)

    def wait(self) -> None:
        for process in self.processes:
            try:
                _, err = process.communicate(timeout=self.seconds + 60)
            except subprocess.TimeoutExpired:
                process.kill()
                err = b"timed out"
            if process.returncode != 0:
                self.errors.append(f"py-spy exited {process.returncode}: {err.decode()[-500:]}")

    def summary(self, n: int = 15) -> dict[str, Any]:
        gil = top_functions(self.raw, n)
        active = top_functions(self.active, n)
        return {
            "svg": str(self.svg),
            "raw": str(self.raw),
            "active_raw": str(self.active),
            "dump": str(self.dump),
            "seconds": self.seconds,
            "samples": gil["samples"],
            "top_self": gil["self"],
            "top_total": gil["total"],
            "self_by_package": gil["packages"],
            "active_samples": active["samples"],
            "active_top_self": active["self"],
            "errors": self.errors,
        }


_PLUMBING = (
    "<frozen runpy>",
    "asyncio/base_events.py",
    "asyncio/events.py",
    "mode/worker.py",
    "sagalog.services.tracker/__main__.py",
    "threading.py",
)
"""Frames on nearly every stack (interpreter start, the event loop): left out of totals."""


def top_functions(raw: Path, n: int) -> dict[str, Any]:
    """From py-spy's collapsed stacks: top ``n`` by self and by total, in % of samples."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    samples = 0
    if raw.exists():
        for line in raw.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            samples += count
            frames = [_function(f) for f in stack.split(";")]
            own[frames[-1]] += count
            packages[_package(frames[-1])] += count
            for name in set(frames):
                if not any(marker in name for marker in _PLUMBING):
                    total[name] += count

    def share(counter: Counter[str]) -> list[list[Any]]:
        return [[name, round(100 * c / samples, 1)] for name, c in counter.most_common(n)]

    if not samples:
        return {"samples": 0, "self": [], "total": [], "packages": []}
    return {
        "samples": samples,
        "self": share(own),
        "total": share(total),
        "packages": share(packages),
    }


def _package(function: str) -> str:
    """``fn (faust/topics.py)`` -> ``faust``; the standard library's modules by name."""
    _, _, where = function.partition(" (")
    return where.rstrip(")").split("/", 1)[0].removesuffix(".py") or "?"


def _function(frame: str) -> str:
    """``fn (path/to/module.py:123)`` -> ``fn (module.py)``: lines of one function merged."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    for marker in ("site-packages/", "services/", "src/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path})" if path else name


# --- the measurement --------------------------------------------------------------------


@dataclass
class LiveRun:
    workflows: int
    inputs: int
    transitions: TransitionSummary | None = None
    events_per_s: float | None = None
    error: str | None = None
    preload_s: float = 0.0
    wall_s: float = 0.0
    worker: Worker | None = None
    profile: dict[str, Any] | None = None
    cpu_pct: float | None = None
    """The worker's CPU (100 = one core) from the first transition seen to the last."""
    machine_busy_pct: float | None = None
    """The whole machine's CPU over the same time (100 = every core busy)."""


@dataclass
class TrackerBenchResult:
    results: dict[str, Any]
    rows: list[tuple[str, str]]


def run_live(
    lab: Lab,
    workflows: int,
    *,
    progress: Callable[[str], None],
    profile: Path | None = None,
    profile_s: float = 20.0,
    startup_timeout_s: float = 180.0,
    stall_timeout_s: float = 120.0,
) -> LiveRun:
    """Preload, start a worker, wait for every transition; the worker is left running."""
    lab.start_clock(lab.app_id)
    progress(f"{lab.suffix}: preloading {workflows:,} workflows x {len(INPUTS)} events")
    started = time.monotonic()
    inputs = lab.preload(workflows)
    run = LiveRun(workflows=workflows, inputs=inputs, preload_s=time.monotonic() - started)
    progress(f"{lab.suffix}: {inputs:,} events preloaded in {run.preload_s:.1f}s; tracker starts")
    expected = workflows * TRANSITIONS_PER_WORKFLOW
    started = time.monotonic()
    worker = run.worker = lab.worker("live", lab.app_id, lab.scratch / "data-live")
    profiler: Profiler | None = None
    last_count, last_change, last_report = 0, time.monotonic(), time.monotonic()
    busy_from: tuple[float, float, tuple[int, int]] | None = None
    try:
        while True:
            worker.check_alive(f"processing the backlog ({last_count:,}/{expected:,} transitions)")
            count = lab.count(lab.transitions_topic)
            now = time.monotonic()
            if count and busy_from is None:
                busy_from = (now, cpu_seconds(worker.pid), machine_ticks())
            if count and profile is not None and profiler is None:
                profiler = Profiler(profile, worker.pid, profile_s)
                profiler.start()
                progress(f"{lab.suffix}: py-spy sampling pid {worker.pid} for {profile_s:g}s")
            if count >= expected:
                if busy_from is not None:
                    since, cpu, (busy, total) = busy_from
                    busy_now, total_now = machine_ticks()
                    run.cpu_pct = 100 * (cpu_seconds(worker.pid) - cpu) / (now - since)
                    run.machine_busy_pct = 100 * (busy_now - busy) / max(1, total_now - total)
                break
            if count != last_count:
                last_count, last_change = count, now
            limit = stall_timeout_s if count else startup_timeout_s
            if now - last_change > limit:
                raise TrackerBenchError(
                    f"live run stalled: {count:,}/{expected:,} transitions, none new for "
                    f"{limit:g}s\n{worker.tail()}"
                )
            if now - last_report > 10:
                last_report = now
                progress(f"{lab.suffix}: {count:,}/{expected:,} transitions")
            time.sleep(0.5)
        run.wall_s = time.monotonic() - started
        progress(f"{lab.suffix}: {expected:,} transitions after {run.wall_s:.1f}s; verifying")
        summary = run.transitions = lab.read_transitions(expected=expected)
        span_ms = summary.last_ms - summary.first_ms
        if summary.workflows_at_gate != workflows:
            raise TrackerBenchError(
                f"only {summary.workflows_at_gate:,} of {workflows:,} workflows reached "
                f"{GATE_STATE} (transitions by state: {dict(summary.states)})"
            )
        if span_ms <= 0:
            raise TrackerBenchError(f"transitions span {span_ms} ms: no rate to compute")
        run.events_per_s = inputs / (span_ms / 1000)
    except TrackerBenchError as exc:
        run.error = str(exc)
    finally:
        if profiler is not None:
            profiler.wait()
            run.profile = profiler.summary()
    return run


def measure_idle(
    lab: Lab, run: LiveRun, *, seconds: float, progress: Callable[[str], None]
) -> IdleCost:
    assert run.worker is not None
    if not lab.wait_committed(lab.app_id, timeout=120):
        progress(f"{lab.suffix}: WARNING offsets not all committed after 120 s; sampling anyway")
    time.sleep(3)
    progress(f"{lab.suffix}: idle cost with {run.workflows:,} waiting, {seconds:g}s")
    return sample_idle(run.worker, waiting=run.workflows, seconds=seconds)


@dataclass
class Restore:
    records: int
    by_table: dict[str, int]
    duration_ms: int
    baseline_ms: int
    first_empty_ms: int

    @property
    def records_per_s(self) -> float | None:
        spent = self.duration_ms - self.baseline_ms
        return self.records / (spent / 1000) if spent > 0 else None


def empty_start(lab: Lab, *, progress: Callable[[str], None]) -> tuple[int, int]:
    """``tables_ready`` of two starts of an app with empty changelogs (first, second)."""
    durations = []
    lab.start_clock(lab.empty_app_id)
    for n in (1, 2):
        worker = lab.worker(f"empty-{n}", lab.empty_app_id, lab.scratch / f"data-empty-{n}")
        ready = worker.wait_action("tables_ready", timeout=180)
        durations.append(int(ready["duration_ms"]))
        worker.stop()
    progress(f"{lab.suffix}: empty app tables_ready {durations[0]} ms, then {durations[1]} ms")
    return durations[0], durations[1]


def measure_restore(
    lab: Lab, run: LiveRun, baseline: tuple[int, int], *, progress: Callable[[str], None]
) -> Restore:
    assert run.worker is not None
    status = run.worker.stop()
    if status not in (0, None):
        progress(f"{lab.suffix}: WARNING the live worker exited {status} on SIGTERM")
    by_table = lab.changelog_counts(lab.app_id)
    records = sum(by_table.values())
    progress(f"{lab.suffix}: restoring {records:,} changelog records {by_table}")
    worker = lab.worker("restore", lab.app_id, lab.scratch / "data-restore")
    ready = worker.wait_action("tables_ready", timeout=max(600, records / 500))
    worker.stop()
    return Restore(
        records=records,
        by_table=by_table,
        duration_ms=int(ready["duration_ms"]),
        baseline_ms=baseline[1],
        first_empty_ms=baseline[0],
    )


def measure_tracker(
    settings: ClientSettings,
    *,
    workflows: int,
    partitions: int = 3,
    idle_sizes: Iterable[int] = (),
    idle_s: float = 20.0,
    profile: Path | None = None,
    progress: Callable[[str], None] = print,
) -> TrackerBenchResult:
    """Every tracker figure (see the module docstring); failures are reported, not raised."""
    results: dict[str, Any] = {}
    rows: list[tuple[str, str]] = []
    idle_by_waiting: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="sagalog-tracker-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        lab = Lab(settings, scratch / "main", partitions=partitions, progress=progress)
        lab.scratch.mkdir()
        try:
            _main_run(lab, workflows, idle_s, profile, progress, results, rows, idle_by_waiting)
        finally:
            for problem in lab.close():
                progress(f"{lab.suffix}: cleanup: {problem}")
        for size in sorted(set(idle_sizes) - {workflows}):
            lab = Lab(settings, scratch / f"idle-{size}", partitions=partitions, progress=progress)
            lab.scratch.mkdir()
            try:
                _idle_run(lab, size, idle_s, progress, rows, idle_by_waiting)
            finally:
                for problem in lab.close():
                    progress(f"{lab.suffix}: cleanup: {problem}")
    results["tracker_idle_by_waiting"] = idle_by_waiting
    return TrackerBenchResult(results, rows)


def _main_run(
    lab: Lab,
    workflows: int,
    idle_s: float,
    profile: Path | None,
    progress: Callable[[str], None],
    results: dict[str, Any],
    rows: list[tuple[str, str]],
    idle_by_waiting: dict[str, Any],
) -> None:
    results.update(
        tracker_workflows=workflows,
        tracker_events_per_s=None,
        tracker_input_events=None,
        tracker_transitions=None,
        tracker_error=None,
        restore_records_per_s=None,
        tracker_idle_cpu_pct=None,
        tracker_idle_rss_mb=None,
    )
    try:
        lab.setup()
        progress(f"{lab.suffix}: project ready; baseline start of an empty app")
        baseline = empty_start(lab, progress=progress)
        run = run_live(lab, workflows, progress=progress, profile=profile)
    except Exception as exc:
        results["tracker_error"] = f"setup: {exc}"
        rows.append(("tracker", f"FAILED in setup: {_first_line(exc)}"))
        progress(f"tracker bench failed in setup: {exc}")
        return
    results["tracker_input_events"] = run.inputs
    results["tracker_preload_s"] = round(run.preload_s, 1)
    if run.cpu_pct is not None and run.machine_busy_pct is not None:
        results["tracker_live_cpu_pct"] = round(run.cpu_pct, 1)
        results["tracker_live_machine_busy_pct"] = round(run.machine_busy_pct, 1)
    if run.transitions is not None:
        results["tracker_transitions"] = run.transitions.total
        results["tracker_transitions_to_gate"] = run.transitions.to_gate
        results["tracker_workflows_at_gate"] = run.transitions.workflows_at_gate
        results["tracker_transitions_span_s"] = round(
            (run.transitions.last_ms - run.transitions.first_ms) / 1000, 2
        )
    if run.profile is not None:
        results["tracker_profile"] = run.profile
    if run.error is not None or run.events_per_s is None:
        results["tracker_error"] = run.error
        rows.append((f"tracker live, {workflows:,} workflows", "FAILED (see tracker_error)"))
        progress(f"tracker live run FAILED: {run.error}")
        return
    summary = run.transitions
    assert summary is not None
    results["tracker_events_per_s"] = round(run.events_per_s, 1)
    rows.append(
        (
            f"tracker live, {workflows:,} workflows to the gate",
            f"{run.events_per_s:,.0f} events/s ({run.inputs:,} inputs, {summary.total:,} "
            f"transitions in {(summary.last_ms - summary.first_ms) / 1000:.1f}s)",
        )
    )
    if run.cpu_pct is not None and run.machine_busy_pct is not None:
        rows.append(
            (
                "  CPU meanwhile",
                f"tracker {run.cpu_pct:.0f}% of a core, machine {run.machine_busy_pct:.0f}% "
                "busy (all cores; the broker shares them)",
            )
        )
    try:
        idle = measure_idle(lab, run, seconds=idle_s, progress=progress)
    except Exception as exc:
        results["tracker_error"] = f"idle: {exc}"
        rows.append(("tracker idle", f"FAILED: {_first_line(exc)}"))
    else:
        results["tracker_idle_cpu_pct"] = round(idle.cpu_pct, 2)
        results["tracker_idle_rss_mb"] = round(idle.rss_mb, 1)
        idle_by_waiting[str(workflows)] = idle.as_dict()
        rows.append(_idle_row(idle))
    stats = run.worker.actions("stats") if run.worker is not None else []
    if stats:
        message = str(stats[-1].get("message"))
        progress(f"{lab.suffix}: last stats line: {message}")
        counts = _stats_counts(message)
        if counts.get("batches"):
            consumed = counts.get("inputs", 0) + counts.get("own_echo", 0)
            results["tracker_batches"] = counts["batches"]
            results["tracker_records_per_batch"] = round(consumed / counts["batches"], 1)
    try:
        restore = measure_restore(lab, run, baseline, progress=progress)
    except Exception as exc:
        results["restore_error"] = str(exc)
        rows.append(("tracker restore", f"FAILED: {_first_line(exc)}"))
        progress(f"tracker restore FAILED: {exc}")
        return
    rate = restore.records_per_s
    results.update(
        restore_records_per_s=None if rate is None else round(rate, 1),
        restore_records=restore.records,
        restore_records_by_table=restore.by_table,
        restore_tables_ready_ms=restore.duration_ms,
        restore_baseline_tables_ready_ms=restore.baseline_ms,
        restore_first_empty_start_tables_ready_ms=restore.first_empty_ms,
    )
    shown = "FAILED (not slower than the empty start)" if rate is None else f"{rate:,.0f} records/s"
    rows.append(
        (
            "tracker restore (empty data dir)",
            f"{shown} ({restore.records:,} changelog records; tables_ready "
            f"{restore.duration_ms:,} ms vs {restore.baseline_ms:,} ms for an empty app)",
        )
    )


def _idle_run(
    lab: Lab,
    size: int,
    idle_s: float,
    progress: Callable[[str], None],
    rows: list[tuple[str, str]],
    idle_by_waiting: dict[str, Any],
) -> None:
    try:
        lab.setup()
        run = run_live(lab, size, progress=progress)
        if run.error is not None:
            raise TrackerBenchError(run.error)
        idle = measure_idle(lab, run, seconds=idle_s, progress=progress)
    except Exception as exc:
        idle_by_waiting[str(size)] = {"error": str(exc)}
        rows.append((f"tracker idle, {size:,} waiting", f"FAILED: {_first_line(exc)}"))
        progress(f"tracker idle run for {size:,} FAILED: {exc}")
        return
    figures = idle.as_dict()
    figures["events_per_s"] = None if run.events_per_s is None else round(run.events_per_s, 1)
    if run.cpu_pct is not None and run.machine_busy_pct is not None:
        figures["live_cpu_pct"] = round(run.cpu_pct, 1)
        figures["live_machine_busy_pct"] = round(run.machine_busy_pct, 1)
    idle_by_waiting[str(size)] = figures
    rows.append(_idle_row(idle))
    if run.events_per_s is not None:
        rows.append((f"  live rate at {size:,} workflows", f"{run.events_per_s:,.0f} events/s"))


def _idle_row(idle: IdleCost) -> tuple[str, str]:
    return (
        f"tracker idle, {idle.waiting:,} waiting at the gate",
        f"CPU {idle.cpu_pct:.2f}% of a core over {idle.seconds:.0f}s, RSS {idle.rss_mb:,.0f} MB "
        f"(peak {idle.peak_rss_mb:,.0f} MB)",
    )


def _stats_counts(message: str) -> dict[str, int]:
    """The counters of a ``tracker stats: {...}; outcomes ...`` line ({} if unreadable)."""
    try:
        text = message.split("tracker stats: ", 1)[1].split("; outcomes", 1)[0]
        counts = ast.literal_eval(text)
    except (IndexError, ValueError, SyntaxError):
        return {}
    return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else {}


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
