"""Reaching the Kafka cluster with a bounded wait.

librdkafka retries forever by design; a person at a terminal or a CI job needs a
clear error after a few seconds instead. Every sagalog command that talks to the
cluster goes through ``connect_admin`` first.
"""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from sagalog.errors import ServiceUnavailableError
from sagalog.settings import ClientSettings


def connect_admin(settings: ClientSettings) -> tuple[AdminClient, ClusterMetadata]:
    """An admin client and the cluster's metadata, or a clear error within the timeout.

    Raises:
        ServiceUnavailableError: the brokers did not answer within
            ``settings.connect_timeout_s``.
    """
    admin = AdminClient(settings.kafka_config())
    try:
        metadata = admin.list_topics(timeout=settings.connect_timeout_s)
    except KafkaException as exc:
        raise ServiceUnavailableError(
            f"Kafka at {settings.bootstrap_servers} did not answer within "
            f"{settings.connect_timeout_s:g}s ({exc.args[0].str() if exc.args else exc}); "
            "start the local stack with `sagalog dev up` or set SAGALOG_BOOTSTRAP_SERVERS"
        ) from exc
    return admin, metadata


def profile_config(settings: ClientSettings) -> dict[str, str]:
    """Topic configs the cluster profile gives every topic sagalog creates by itself."""
    return {"min.insync.replicas": str(settings.min_insync_replicas)}


def internal_topic(
    settings: ClientSettings, name: str, *, partitions: int, config: dict[str, str]
) -> NewTopic:
    """A topic a service creates for itself (retry, clock, assignor), on the cluster profile.

    Internal topics hold state a restart needs (pending retries, the last tick, the
    tracker's group leader), so they get the replication and min ISR of the declared
    topics, never the broker's default of one replica.
    """
    return NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=settings.replication_factor,
        config={**profile_config(settings), **config},
    )
