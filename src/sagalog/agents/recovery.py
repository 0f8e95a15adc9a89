"""When an agent rebuilds its Kafka clients in-process instead of exiting: pure rules.

A broker's loss and return is an outage the agent rides out. What it cannot ride
out with the clients it has, it cures by closing them and building new ones: a new
consumer rejoins the group and resumes from the committed offsets, a new
transactional producer (same ``transactional.id``) fences the old one and aborts
its open transaction in ``init_transactions``, and the projection (RocksDB) stays.
Two cases need that:

- **The consumer is fatal**: "static consumer fenced by other consumer with same
  group.instance.id" when the group coordinator moved or restarted. The other
  consumer is the agent itself: librdkafka rejoins with an empty member id after
  its session timed out against an absent coordinator, a join the coordinator may
  process twice (one sent before the move, one after), and a static member that
  rejoins with an unknown member id replaces its old member id and fences whatever
  still carries it (KIP-345; KAFKA-8500, apache/kafka#6899). The consumer holding
  the older id gets FENCED_INSTANCE_ID, which librdkafka makes fatal
  (confluentinc/librdkafka#2635, #3437; the same self-fencing in the Java client:
  KAFKA-20983/20985, apache/kafka#23265, #23266). A fatal consumer refuses every
  later call, so only a new one helps.
- **A call outside the transaction timed out** (the committed offsets read on an
  assignment, a rewind, a new producer's ``init_transactions``): the clients' state
  after it is not known, and new ones start from what the broker committed.

Static membership is kept: a restarted instance takes its partitions back at once
(no session timeout to wait out, no rebalance of the others), and a paused zombie
is fenced out of the group as well as out of transactions. Its cost, this
self-fencing, is cured by rejoining. A genuine second instance with the same
instance id would be fenced again and again; ``RejoinBudget`` bounds the rejoins
(``max_rejoins`` in ten minutes), past which the agent exits 70 as before.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

FENCED_INSTANCE_ID = 82
"""Kafka's error code for "static consumer fenced by other consumer with same
group.instance.id" (``KafkaError.FENCED_INSTANCE_ID``)."""


@dataclass
class RejoinBudget:
    """At most ``limit`` rejoins after a fencing within any ``window_s``."""

    limit: int
    window_s: float = 600.0
    times: deque[float] = field(default_factory=deque)

    def take(self, now: float) -> bool:
        """Whether one more rejoin is allowed now (and count it if so)."""
        while self.times and now - self.times[0] >= self.window_s:
            self.times.popleft()
        if len(self.times) >= self.limit:
            return False
        self.times.append(now)
        return True
