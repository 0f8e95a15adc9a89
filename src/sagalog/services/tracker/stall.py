"""Which partitions a tracker worker has stopped reading: a pure judgement.

A worker can stop delivering one partition while others flow (after a broker restart,
say), so a watchdog that waits for the whole worker to go quiet never fires
(docs/design/incident-history.md). Per partition, then: a partition is *suspect* while
committed records lie past the group's committed offset; it is *stalled* when it stayed
suspect with that offset unmoved for ``after_s``. A worker that is merely busy commits
every second and is never stalled; one that is idle has nothing past its offset. A
worker deep in a backlog is neither: one partition's few records (a clock tick) can wait
behind thousands of another's in the stream's full queue for longer than ``after_s``
(``waiting_its_turn``).
"""

from __future__ import annotations

from dataclasses import dataclass

Position = tuple[str, int]


@dataclass(frozen=True)
class Suspect:
    since: float
    committed: int


def judge(
    suspects: dict[Position, Suspect],
    behind: dict[Position, tuple[int, int]],
    *,
    now: float,
    after_s: float,
) -> tuple[dict[Position, Suspect], list[Position]]:
    """The suspects after this look, and the partitions stalled for ``after_s``.

    Args:
        suspects: the previous look's.
        behind: ``(committed, end)`` of each partition with records past its offset.
    """
    kept: dict[Position, Suspect] = {}
    stalled = []
    for key, (committed, _) in behind.items():
        old = suspects.get(key)
        if old is None or old.committed != committed:
            kept[key] = Suspect(since=now, committed=committed)
            continue
        kept[key] = old
        if now - old.since >= after_s:
            stalled.append(key)
    return kept, sorted(stalled)


@dataclass(frozen=True)
class Sorted:
    """Stalled partitions sorted by their cure (``sort_stalled``).

    Attributes:
        not_read: nothing past the group's offset reached the batches: restart the worker.
        recommit: decided, but the commit of the offset did not land: commit these again.
        in_hand: read and handed to the batches, waiting behind the batch in hand, which
            waits for the broker: wait with it (the health says so), restart nothing.
    """

    not_read: list[Position]
    recommit: dict[Position, int]
    in_hand: list[Position]


def sort_stalled(
    stalled: list[Position],
    behind: dict[Position, tuple[int, int]],
    finished: dict[Position, int],
    handed: dict[Position, int],
    *,
    batch_age_s: float | None,
    batch_bound_s: float,
) -> Sorted:
    """Sort stalled partitions into those truly not read, those only not committed, and
    those whose records wait behind the batch in hand.

    Decided past the group's offset (the worker's own book says so): the records were
    read and decided, only the commit did not land (one in flight across a rebalance,
    or overtaken by an older one); the cure is to commit again, not to restart a worker
    that decided everything (docs/design/incident-history.md).

    Handed to the batches past the group's offset, while a batch has been in hand for
    less than ``batch_bound_s``: the records were read; the batch in hand is waiting
    for the broker (a leader cut off from its peers holds the transaction's acks until
    the cut heals, a restarted coordinator answers late), and the records behind it
    wait their turn. A restart would not get past the broker any sooner: it would throw
    the batch away, and the tables with it, to wait for the same broker. A batch in
    hand longer than ``batch_bound_s`` (a cut that lasts, or a client that hangs), or
    records handed while no batch is in hand, is a stall like any other.

    Args:
        finished: the offset after the last record decided, per partition.
        handed: the offset after the last record the input handed to the batches.
        batch_age_s: how long the batch in hand has been (None: no batch in hand).
    """
    recommit: dict[Position, int] = {}
    not_read: list[Position] = []
    in_hand: list[Position] = []
    waiting = batch_age_s is not None and batch_age_s < batch_bound_s
    for key in stalled:
        committed, _ = behind[key]
        if finished.get(key, -1) > committed:
            recommit[key] = finished[key]
        elif waiting and handed.get(key, -1) > committed:
            in_hand.append(key)
        else:
            not_read.append(key)
    return Sorted(not_read=not_read, recommit=recommit, in_hand=in_hand)


def waiting_its_turn(*, queued: int, capacity: int, progressed: bool) -> bool:
    """Whether records past a partition's offset may just be queued behind a backlog.

    True while the worker decided a batch since the last look and its stream's queue is
    at least half full: the fetcher hands partitions over in turns, and a busy queue is
    drained in order, so a partition with little in it (a clock tick) can wait its turn
    behind another's backlog for tens of seconds. A full queue that nobody takes from
    (no progress) is a stall like any other.
    """
    return progressed and queued * 2 >= capacity
