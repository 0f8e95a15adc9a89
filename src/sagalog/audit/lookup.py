"""Finding one workflow's record with a point lookup, never a scan of its topic.

The record holds what the tracker sealed: the positions and hashes of the
workflow's events and its chain head (``sagalog.tracker.seal``). Two places hold it:

- the **gateway's read model** (``GET /v1/workflows/{id}``), one HTTP call, which
  also knows where each of the workflow's transitions lies;
- the tracker's **records changelog** (``<tracker app id>-records-changelog``). A
  record is written to the changelog partition of its workflow's topic partition,
  which sagalog's producers chose with the Java client's murmur2 partitioner (as
  faust does; ``client_config.PRODUCER_ONLY``), so the key's partition is computed
  (``partition_for``) and only that partition is read, newest records first: the
  latest record of a key is usually near the end.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka.partitioner import DefaultPartitioner
from confluent_kafka import Consumer, Message

from sagalog.audit.reading import ReadStats, partitions_of, read_range, watermarks
from sagalog.flows.states import TERMINAL_STATES
from sagalog.tracker.record import SealedEvent, WorkflowRecord

_FIRST_WINDOW = 5_000
"""Records read first from the end of the changelog partition; each next window is 4x."""


def partition_for(key: bytes, partitions: int) -> int:
    """The partition a sagalog producer (and faust) puts ``key`` in: murmur2, as Java's.

    It is aiokafka's own partitioner, the one faust keys its tables with, so the
    answer is the tracker's by construction.
    """
    every = list(range(partitions))
    return int(DefaultPartitioner()(key, every, every))


@dataclass(frozen=True)
class WorkflowSeal:
    """What the tracker sealed about one workflow, from wherever its record was read.

    Attributes:
        workflow_id, flow, flow_version, state, terminal_reason: the record's summary.
        chain: the chain head over every sealed event (None: nothing sealed).
        chain_base: the chain value before ``sealed[0]`` (None: the chain's start).
        dropped: sealed events older than ``sealed[0]``, no longer listed.
        sealed: the sealed events, in the order the tracker read them.
        source: where the record was read, for the report.
        transitions: where the workflow's transitions lie (partition, offset), when
            the source knows (the gateway); None otherwise.
    """

    workflow_id: str
    flow: str
    flow_version: int
    state: str
    terminal_reason: str | None
    chain: str | None
    chain_base: str | None
    dropped: int
    sealed: tuple[SealedEvent, ...]
    source: str
    started_at_ms: int | None = None
    transitions: tuple[tuple[int, int], ...] | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @classmethod
    def from_record(cls, record: WorkflowRecord, *, source: str) -> WorkflowSeal:
        return cls(
            workflow_id=record.workflow_id,
            flow=record.flow,
            flow_version=record.flow_version,
            state=record.state.value,
            terminal_reason=record.terminal_reason,
            chain=record.chain,
            chain_base=record.chain_base,
            dropped=record.sealed_dropped,
            sealed=record.sealed,
            source=source,
            started_at_ms=record.started_at_ms,
        )

    @classmethod
    def from_gateway(cls, detail: Mapping[str, Any], *, source: str) -> WorkflowSeal:
        """From the gateway's ``WorkflowDetail`` JSON (its ``seal`` and ``history``)."""
        seal = detail.get("seal") or {}
        history = detail.get("history") or []
        positions = tuple(
            (int(h["partition"]), int(h["offset"]))
            for h in history
            if h.get("partition") is not None and h.get("offset") is not None
        )
        started = detail.get("started_at")
        return cls(
            workflow_id=detail["workflow_id"],
            flow=detail["flow"],
            flow_version=int(detail["flow_version"]),
            state=detail["state"],
            terminal_reason=detail.get("terminal_reason"),
            chain=seal.get("chain"),
            chain_base=seal.get("chain_base"),
            dropped=int(seal.get("dropped") or 0),
            sealed=tuple(SealedEvent.model_validate(e) for e in seal.get("events") or ()),
            source=source,
            started_at_ms=_epoch_ms(started) if started else None,
            transitions=positions if len(positions) == len(history) else None,
        )


def record_from_changelog(
    consumer: Consumer, topic: str, workflow_id: str, *, timeout_s: float, stats: ReadStats
) -> tuple[WorkflowRecord | None, int]:
    """The latest record of ``workflow_id`` in the changelog ``topic``, and its partition.

    Reads only the key's partition, in windows from its end backwards (5,000
    records, then four times more each time), and stops at the first window that
    holds the key: its last value there is the latest. None when the partition
    holds no record of the key, or its latest value is a deletion.

    Raises:
        AuditError: the changelog does not exist (wrong ``--tracker-app-id``?).
    """
    key = workflow_id.encode()
    partition = partition_for(key, partitions_of(consumer, topic, timeout_s=timeout_s))
    low, end = watermarks(consumer, topic, partition, timeout_s=timeout_s)
    window = _FIRST_WINDOW
    while end > low:
        start = max(low, end - window)
        found = read_range(
            consumer,
            topic,
            partition,
            start,
            end,
            keep=lambda message: _has_key(message, key),
            timeout_s=timeout_s,
            stats=stats,
        )
        if found:
            latest = found[-1].value
            if latest is None:
                return None, partition
            return WorkflowRecord.from_stored(json.loads(latest)), partition
        end, window = start, window * 4
    return None, partition


def _has_key(message: Message, key: bytes) -> bool:
    return message.key() == key


def _epoch_ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
