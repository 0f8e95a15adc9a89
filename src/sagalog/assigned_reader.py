"""Consumers that read partitions they assign themselves: no group membership, no
commits (the audit, ``tail``, the personal-data key ring).

confluent-kafka requires a ``group.id`` even then, and librdkafka looks the group's
coordinator up for any consumer that has one. A principal with no right on that
group gets ``GROUP_AUTHORIZATION_FAILED`` from ``poll``, although it will never join
or commit: an assign-only reader needs READ on its topics and nothing on a group.
Seen on the secure stack, where every catch-up of the key ring failed on it until
it passed the error over; every such reader passes it over here, in one place.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaError

from sagalog.settings import ClientSettings

#: Errors ``poll`` hands an assign-only reader that do not concern what it reads.
NOT_OURS = frozenset({KafkaError.GROUP_AUTHORIZATION_FAILED})


def assigned_consumer(settings: ClientSettings, group_id: str, **config: Any) -> Consumer:
    """A consumer for ``assign``: never commits, stores no offsets, plus ``config``."""
    return Consumer(
        settings.kafka_config(
            **{
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                **config,
            }
        )
    )


def not_ours(error: Any) -> bool:
    """Whether ``error`` (a message's) is one an assign-only reader passes over."""
    return error is not None and error.code() in NOT_OURS
