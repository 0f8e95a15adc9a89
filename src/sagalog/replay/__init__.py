"""Reading the event log back: the replay source of analytics, rebuilds and audits.

``reader.TopicReplay`` reads a topic (or a time range of it) with confluent-kafka in
batches and decodes the records with fastavro through ``EventCodec``'s cached
readers, as fast as one process can; ``chunks.ChunkReader`` is the layer under it
(raw records of several topics, with the offsets to resume from).

Replaying through the tracker's decisions lives in submodules that this package
does not import (they need the tracker's processor, see ``processing``):
``rebuild`` (``journal``, ``engine``, ``store``, ``diff``) for ``sagalog replay
rebuild``, and ``whatif`` (``simulation``, ``assumptions``) for ``sagalog replay
whatif``.
"""

from sagalog.replay.decoding import BatchDecoder, ReplayBatch, ReplayStats, UndecodableRecord
from sagalog.replay.exceptions import ReplayError
from sagalog.replay.reader import (
    PartitionRange,
    ReplayPlan,
    TopicReplay,
    plan_replay,
    replay_consumer_config,
)

__all__ = [
    "BatchDecoder",
    "PartitionRange",
    "ReplayBatch",
    "ReplayError",
    "ReplayPlan",
    "ReplayStats",
    "TopicReplay",
    "UndecodableRecord",
    "plan_replay",
    "replay_consumer_config",
]
