"""Whether a partition was read to its end, so that its timers may fire.

A timer fires only once every workflow topic's partition was fetched up to its end:
after a restart with a backlog, a step's completion still waiting in the log must not
lose the race against its own timeout. The guard fails closed: a partition not fetched
yet, or one whose position the consumer cannot tell, counts as unread, and its timers
wait for the next tick. An error counted as "caught up" would turn the guard off exactly
when the consumer is in trouble.

Three things are checked, because the first alone lets an event lose to a timer: the
tracker decides the tick, fails the workflow by its timeout, and reads the event a
moment later, to ignore it (docs/design/incident-history.md).

- The high watermark the consumer's last fetch reported (librdkafka's cached figure).
- The ``read_committed`` end as the broker gives it when the timers are due (one
  ListOffsets for all the due partitions of a tick): a record committed after the
  last fetch, before the tick, is not in the cached figure.
- The records fetched and handed over but still queued behind the batch in hand:
  the consumer's position counts them as read; they are not decided yet.

So what was committed to a partition before its timers are decided is decided first.
"""

from __future__ import annotations


def unread(
    high: int | None,
    position: int | None,
    stable: int | None = None,
    *,
    handed: int | None = None,
    decided: int | None = None,
) -> str | None:
    """Why the partition may still hold records the tracker has not decided; None: it
    decided everything up to its end.

    Args:
        high: the high watermark the consumer last saw (None: nothing fetched yet).
        position: the consumer's next offset (None: not known yet).
        stable: the ``read_committed`` end the broker gives now (None: not asked).
        handed: the offset after the last record handed to the batches (None: none).
        decided: the offset after the last record decided, this batch's included.
    """
    if high is None or position is None:
        return "not fetched yet"
    if position < high:
        return f"{high - position} record(s) not read yet"
    if handed is not None and (decided is None or decided < handed):
        return f"read to offset {handed}, decided to {decided if decided is not None else 'none'}"
    if stable is not None and position < stable:
        return f"{stable - position} record(s) written since the last fetch"
    return None
