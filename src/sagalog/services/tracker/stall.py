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


def unread(
    stalled: list[Position], behind: dict[Position, tuple[int, int]], finished: dict[Position, int]
) -> tuple[list[Position], dict[Position, int]]:
    """Split stalled partitions into those truly not read and those only not committed.

    The worker's own book says how far it decided each partition. Where that is past
    the group's committed offset, the records were read and decided; only the commit
    did not land (one in flight across a rebalance, or overtaken by an older one): the
    cure is to commit again, not to restart, which would throw away a worker that
    decided everything (docs/design/incident-history.md).

    Returns:
        The partitions not read (restart the worker), and the offsets to commit
        again for the others.
    """
    recommit = {}
    not_read = []
    for key in stalled:
        committed, _ = behind[key]
        done = finished.get(key, -1)
        if done > committed:
            recommit[key] = done
        else:
            not_read.append(key)
    return not_read, recommit


def waiting_its_turn(*, queued: int, capacity: int, progressed: bool) -> bool:
    """Whether records past a partition's offset may just be queued behind a backlog.

    True while the worker decided a batch since the last look and its stream's queue is
    at least half full: the fetcher hands partitions over in turns, and a busy queue is
    drained in order, so a partition with little in it (a clock tick) can wait its turn
    behind another's backlog for tens of seconds. A full queue that nobody takes from
    (no progress) is a stall like any other.
    """
    return progressed and queued * 2 >= capacity
