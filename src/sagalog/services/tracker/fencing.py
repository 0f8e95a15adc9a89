"""Fencing a tracker worker that lost its partitions while it was paused.

A worker stopped (SIGSTOP, a long GC-like stall, a frozen VM) past its session is
dropped from the group and its partitions move on. When it wakes it still holds the
batch it was deciding and, until its next heartbeat, believes it owns them. Without a
fence it publishes that batch's commands and transitions for partitions another worker
now decides, and writes their changelogs behind the new owner's back.

The fence is Kafka's own (KIP-447, as Kafka Streams' exactly-once v2 does it): each
batch is one transaction of the tracker's producer holding its outputs, its changelog
writes and its input offsets, the offsets sent with the group membership the batch was
decided under. The group coordinator refuses those offsets from a member of an older
generation (``ILLEGAL_GENERATION``, ``UNKNOWN_MEMBER_ID``), the transaction is
aborted, and ``read_committed`` readers (agents, the next owner's restore, analytics)
never see any of it. An epoch check written by hand would need every reader to
remember and compare epochs; the transaction needs none, and a crash between the
outputs and the offsets can no longer publish a batch twice.

faust's consumer is aiokafka's, not librdkafka's, so the membership comes from
aiokafka's group coordinator and is handed to librdkafka in the serialized form of its
``rd_kafka_consumer_group_metadata_write`` (versioned ``CGMDv2``), which librdkafka
reads back in ``send_offsets_to_transaction``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from sagalog.errors import SagalogError

_MAGIC = b"CGMDv2:"


class NotAMember(SagalogError):
    """The worker holds no group membership (between a rebalance's revoke and join)."""


@dataclass(frozen=True)
class Membership:
    """A consumer's place in its group when a batch is decided.

    Attributes:
        group_id: the consumer group (the tracker's ``app_id``).
        generation: the group's generation the member joined; -1 outside the group.
        member_id: the id the coordinator gave the member.
        instance_id: the static ``group.instance.id``, if any.
    """

    group_id: str
    generation: int
    member_id: str
    instance_id: str | None = None


def group_metadata(membership: Membership) -> bytes:
    """The membership as librdkafka's serialized consumer group metadata.

    The layout librdkafka writes and reads: the magic, the generation as a 32-bit
    integer in the machine's byte order, the group id and the member id each followed
    by a NUL, then a flag byte (1: no instance id; 0: the instance id follows, with a
    NUL). ``tests/unit/test_tracker_fencing.py`` compares it with what a
    librdkafka consumer produced.

    Raises:
        NotAMember: the generation is negative; offsets sent so would not be fenced.
    """
    if membership.generation < 0 or not membership.member_id:
        raise NotAMember(
            f"consumer group {membership.group_id}: this worker is not a member now "
            f"(generation {membership.generation}); its batch cannot be committed"
        )
    parts = [
        _MAGIC,
        struct.pack("=i", membership.generation),
        membership.group_id.encode() + b"\x00",
        membership.member_id.encode() + b"\x00",
    ]
    if membership.instance_id is None:
        parts.append(b"\x01")
    else:
        parts.append(b"\x00" + membership.instance_id.encode() + b"\x00")
    return b"".join(parts)
