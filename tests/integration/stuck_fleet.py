"""What a fleet test says when a workflow does not move: enough to name the cause.

Issue 45: the console test's cancelled filing stayed ``compensating`` for 120 s, the
records agent had handled its ``CompensationRequested``, and the tracker's input
count stood still. The run's logs could not tell an output never committed, one held
behind an open transaction, one on a partition the tracker was not reading, or a
tracker stuck inside a batch. This report tells them apart: each partition's last
stable offset against its log end (an open transaction between them), the tracker
group's committed offset (what it decided), the services' last log lines, and the
tracker's Python stacks (py-spy, when installed), taken while it is stuck.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from demo.fleet import Fleet
from sagalog.settings import ClientSettings

TIMEOUT_S = 10.0
LOG_LINES = 12


def report(fleet: Fleet, settings: ClientSettings, *, topic: str, group: str) -> str:
    """The offsets of ``topic`` as ``group`` (the tracker's) and the broker see them, the
    fleet's last log lines and the tracker's stacks; never raises."""
    parts = [_offsets(settings, topic, group)]
    for name, service in fleet.services.items():
        state = "alive" if service.alive else f"exited {service.process and service.process.poll()}"
        parts.append(f"--- {name} ({state}), last lines:\n{service.tail(LOG_LINES)}")
    for name, service in fleet.services.items():
        if name.startswith("tracker") and service.alive and service.process is not None:
            parts.append(f"--- {name} stacks:\n{_stacks(service.process.pid)}")
    return "\n".join(parts)


def _offsets(settings: ClientSettings, topic: str, group: str) -> str:
    """Per partition: the group's committed offset, the last stable offset and the log end."""
    try:
        admin = AdminClient(settings.kafka_config())
        metadata = admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic]
        tps = [TopicPartition(topic, p) for p in sorted(metadata.partitions)]
        ends = {
            level: {
                tp.partition: future.result(TIMEOUT_S).offset
                for tp, future in admin.list_offsets(
                    {tp: OffsetSpec.latest() for tp in tps},  # type: ignore[no-untyped-call]
                    isolation_level=level,
                ).items()
            }
            for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)
        }
        reader = Consumer(settings.kafka_config(**{"group.id": group}))
        try:
            committed = {
                tp.partition: tp.offset if tp.offset >= 0 else "none"
                for tp in reader.committed(tps, TIMEOUT_S)
            }
        finally:
            reader.close()
    except (KafkaException, KeyError, TimeoutError) as exc:
        return f"--- {topic}: offsets not known ({exc})"
    rows = [f"--- {topic} (committed by {group}, last stable offset, log end):"]
    for tp in tps:
        p = tp.partition
        stable, end = (
            ends[IsolationLevel.READ_COMMITTED][p],
            ends[IsolationLevel.READ_UNCOMMITTED][p],
        )
        held = "  <- a transaction is open" if stable < end else ""
        rows.append(f"  {topic}/{p}: {committed.get(p)}, {stable}, {end}{held}")
    return "\n".join(rows)


def _stacks(pid: int) -> str:
    beside = Path(sys.executable).parent / "py-spy"
    binary = str(beside) if beside.exists() else shutil.which("py-spy")
    if binary is None:
        return "(py-spy is not installed: no stacks)"
    try:
        dumped = subprocess.run(
            [binary, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(py-spy dump failed: {exc})"
    return dumped.stdout + dumped.stderr
