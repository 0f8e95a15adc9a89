"""Whether a fenced writer wrote after its fence: a pure check of the partitions' logs.

The fencing round (``partitions.tracker_cut_off``) cuts a tracker worker off from every
broker; the other worker takes its partitions over by initializing their transactional
ids, which bumps each id's producer epoch. Whatever the old worker still holds when the
cut heals must never reach a reader. The broker's own record of every write says so:
each record batch carries its producer id and epoch, and each transaction ends in a
control batch (``COMMIT`` or ``ABORT``) with the epoch that ended it
(``kafka.tools.DumpLogSegments``, read from a replica's segment files).

Two rules, each a finding per offending batch, for every producer (the agents' too):

- **Log order.** In one partition's log, once a producer id has written with epoch
  *E*, nothing with a lower epoch of that id follows: not data, not a ``COMMIT``.
- **Time.** Once a producer id's epoch *E* has written anywhere (its first batch's
  timestamp), nothing with a lower epoch of that id is written later, in any
  partition. This catches a stale write to a partition the new owner had not written
  to yet, where the log order alone shows nothing. The tracker's partitions'
  producers run on this machine and the coordinator too: one clock.

Aborted data is written too (``read_committed`` readers skip it); only its commit
would be a fault, so an older epoch's ``ABORT`` marker is no finding.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath

from .checker import Transition

_FIELD = re.compile(r"(\w+): (\S+)")


@dataclass(frozen=True)
class LogBatch:
    """One record batch of a partition's log, as ``DumpLogSegments`` prints it."""

    partition: str
    """``<topic>-<partition>``: the log directory's name."""
    base_offset: int
    producer_id: int
    epoch: int
    transactional: bool
    control: bool
    timestamp_ms: int
    marker: str | None = None
    """``COMMIT`` or ``ABORT`` for a control batch (``--deep-iteration``); else None."""

    @property
    def commits(self) -> bool:
        """Data, or the marker that makes a transaction's data visible."""
        return not self.control or self.marker == "COMMIT"


def parse_dump(text: str) -> list[LogBatch]:
    """The batches of ``DumpLogSegments --deep-iteration --files a.log,b.log`` output.

    ``Dumping <dir>/<topic>-<partition>/<offset>.log`` names the partition of the
    lines after it; a batch line starts with ``baseOffset:``; a record line under it
    (``| offset:``) adds the marker of a control batch (``endTxnMarker: COMMIT``).
    """
    batches: list[LogBatch] = []
    partition = "?"
    for line in text.splitlines():
        if line.startswith("Dumping "):
            partition = PurePath(line.removeprefix("Dumping ").strip()).parent.name
            continue
        fields = dict(_FIELD.findall(line))
        if line.startswith("baseOffset:"):
            batches.append(
                LogBatch(
                    partition=partition,
                    base_offset=int(fields["baseOffset"]),
                    producer_id=int(fields["producerId"]),
                    epoch=int(fields["producerEpoch"]),
                    transactional=fields.get("isTransactional") == "true",
                    control=fields.get("isControl") == "true",
                    timestamp_ms=int(fields.get("CreateTime", fields.get("LogAppendTime", "-1"))),
                )
            )
        elif line.lstrip().startswith("|") and "endTxnMarker" in fields and batches:
            batches[-1] = replace(batches[-1], marker=fields["endTxnMarker"])
    return batches


def written_after_fencing(batches: Iterable[LogBatch]) -> list[str]:
    """Every batch an older epoch wrote after a newer one (log order, then time).

    Args:
        batches: every partition's batches, each partition's in log order.
    """
    by_partition: dict[str, list[LogBatch]] = defaultdict(list)
    for batch in batches:
        by_partition[batch.partition].append(batch)
    findings: list[str] = []
    for partition, log in by_partition.items():
        highest: dict[int, int] = {}
        for batch in log:
            seen = highest.get(batch.producer_id, -1)
            if batch.epoch < seen and batch.commits:
                findings.append(
                    f"{partition}@{batch.base_offset}: producer {batch.producer_id} epoch "
                    f"{batch.epoch} {_what(batch)} after its epoch {seen} (log order)"
                )
            highest[batch.producer_id] = max(seen, batch.epoch)
    every = [b for log in by_partition.values() for b in log]
    began = epochs_began(every)
    for batch in every:
        if not batch.commits:
            continue
        newer = [
            (ms, epoch)
            for epoch, ms in began[batch.producer_id].items()
            if epoch > batch.epoch and ms < batch.timestamp_ms
        ]
        if newer:
            ms, epoch = min(newer)
            findings.append(
                f"{batch.partition}@{batch.base_offset}: producer {batch.producer_id} epoch "
                f"{batch.epoch} {_what(batch)} at {batch.timestamp_ms}, after epoch {epoch} "
                f"took it over at {ms}"
            )
    return sorted(set(findings))


def epochs_began(batches: Iterable[LogBatch]) -> dict[int, dict[int, int]]:
    """When each producer id's each epoch first wrote anywhere: ``{id: {epoch: ms}}``."""
    began: dict[int, dict[int, int]] = defaultdict(dict)
    for batch in batches:
        first = began[batch.producer_id].get(batch.epoch)
        if first is None or batch.timestamp_ms < first:
            began[batch.producer_id][batch.epoch] = batch.timestamp_ms
    return began


def takeovers(batches: Sequence[LogBatch], *, since_ms: int) -> dict[int, tuple[int, int, int]]:
    """Producer ids that wrote with a new epoch from ``since_ms`` on (the cut): each
    one's ``(epoch before, first new epoch, when it began)``, for the round's row."""
    found: dict[int, tuple[int, int, int]] = {}
    for producer, epochs in epochs_began(batches).items():
        before = [e for e, ms in epochs.items() if ms < since_ms]
        after = sorted((e, ms) for e, ms in epochs.items() if ms >= since_ms)
        if before and after and after[0][0] > max(before):
            found[producer] = (max(before), after[0][0], after[0][1])
    return found


def transition_breaks(transitions: dict[str, list[Transition]]) -> tuple[list[str], int]:
    """Duplicate or stale transitions in the transitions topic; and how many repeats.

    A repeat is the same transition record (its ``ce_id``) again: the checker's
    ``dedupe`` allows it (a tracker that crashed between its commit and its offsets
    publishes it again, and readers drop it by id); it is counted, not judged. A
    duplicate is the same move decided twice (two ids, one after the other); a stale
    one leaves a state the workflow was no longer in (its ``from_state`` is not where
    the previous transition went): both are what a fenced worker's late write would
    leave, and each is a finding.
    """
    found = []
    repeats = 0
    for workflow, moves in transitions.items():
        ids: set[str] = set()
        previous: Transition | None = None
        for index, move in enumerate(moves):
            if move.event_id and move.event_id in ids:
                repeats += 1
                continue
            ids.add(move.event_id)
            if previous is not None and _move(move) == _move(previous):
                found.append(
                    f"{workflow} #{index}: {move.from_state}->{move.to_state} decided twice "
                    f"({previous.event_id}, {move.event_id})"
                )
            elif previous is not None and move.from_state != previous.to_state:
                found.append(
                    f"{workflow} #{index}: stale, {move.event_id} leaves {move.from_state} "
                    f"but the workflow was in {previous.to_state}"
                )
            previous = move
    return found, repeats


def _move(t: Transition) -> tuple[str, str, str | None, str | None]:
    return (t.from_state, t.to_state, t.step, t.from_step)


def _what(batch: LogBatch) -> str:
    return f"{batch.marker or 'control'} marker" if batch.control else "data"
