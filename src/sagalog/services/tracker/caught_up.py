"""Whether a partition was read to its end, so that its timers may fire.

A timer fires only once every workflow topic's partition was fetched up to its high
watermark: after a restart with a backlog, a step's completion still waiting in the
log must not lose the race against its own timeout. The guard fails closed: a
partition not fetched yet, or one whose position the consumer cannot tell, counts
as unread, and its timers wait for the next tick. Before, an error in the check
counted as "caught up", which turned the guard off exactly when the consumer was in
trouble.
"""

from __future__ import annotations


def unread(high: int | None, position: int | None) -> str | None:
    """Why the partition may still hold records the tracker has not read; None: read to its end.

    Args:
        high: the high watermark the consumer last saw (None: nothing fetched yet).
        position: the consumer's next offset (None: not known yet).
    """
    if high is None or position is None:
        return "not fetched yet"
    if position < high:
        return f"{high - position} record(s) not read yet"
    return None
