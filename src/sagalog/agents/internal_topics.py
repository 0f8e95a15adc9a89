"""The agent's own topics: checked and, for the retry and claims topics, created at start.

Inputs and the dead-letter topic belong to the topology (``topology/*.yaml``); an
agent refuses to start when one is missing rather than creating it with guessed
settings. The retry topic is internal to the agent, like a stream processor's
changelog: the runtime creates it with as many partitions as the inputs, so partition
i of the inputs and of the retry topic land on the same instance. The claims topic of
an agent with budgets (``sagalog.budgets.claims``) is made the same way, so claims
partition i holds the claims of input partition i.
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from sagalog.authorization import authorization_error, is_authorization_failure, topic_denied
from sagalog.budgets.claims import CLAIMS_TOPIC_CONFIG
from sagalog.cluster import connect_admin, internal_topic
from sagalog.errors import ConfigurationError
from sagalog.settings import ClientSettings
from sagalog.streams.record import STREAM_TOPIC_CONFIG
from sagalog.topic_names import stream_topic_for

RETRY_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(7 * 86_400_000)}


def ensure_internal_topics(
    settings: ClientSettings,
    *,
    inputs: Sequence[str],
    retry_topic: str,
    deadletter_topic: str,
    claims_topic: str | None = None,
) -> int:
    """Check the inputs and the dead-letter topic, create the retry topic (and the
    claims topic, when given: the agent declares budgets) if missing.

    Returns:
        The inputs' partition count.

    Raises:
        ConfigurationError: an input or the dead-letter topic does not exist, or the
            inputs differ in partition count (their workflows would not be co-located).
        AuthorizationError: this principal may not see one of them or create the retry
            or claims topic (its ACLs are not applied: ``sagalog topology apply``).
    """
    admin, metadata = connect_admin(settings)
    counts = {}
    for topic in [*inputs, deadletter_topic]:
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            denied = topic_denied(admin, topic, timeout=settings.connect_timeout_s)
            if denied is not None:
                raise authorization_error(settings, denied, operation="DESCRIBE", resource=topic)
            raise ConfigurationError(
                f"topic '{topic}' does not exist on {settings.bootstrap_servers}; declare it in "
                "topology/ and run `sagalog topology apply`"
            )
        counts[topic] = len(info.partitions)
    input_counts = {counts[t] for t in inputs}
    if len(input_counts) != 1:
        raise ConfigurationError(
            f"an agent's input topics must have the same partition count, so one workflow's "
            f"events meet on one instance: {', '.join(f'{t}={counts[t]}' for t in inputs)}"
        )
    partitions = input_counts.pop()
    owned = {retry_topic: RETRY_TOPIC_CONFIG}
    if claims_topic is not None:
        owned[claims_topic] = CLAIMS_TOPIC_CONFIG
        # An agent with budgets makes model calls, which may stream: the stream topics
        # of its workflow topics, partitioned as they are (``sagalog.streams``).
        for topic in inputs:
            owned[stream_topic_for(topic)] = STREAM_TOPIC_CONFIG
    for topic, config in owned.items():
        _ensure_owned(settings, admin, metadata, topic, partitions=partitions, config=config)
    return partitions


def _ensure_owned(
    settings: ClientSettings,
    admin: AdminClient,
    metadata: ClusterMetadata,
    topic: str,
    *,
    partitions: int,
    config: dict[str, str],
) -> None:
    """Create one of the agent's own topics unless it exists with the inputs' count."""
    existing = metadata.topics.get(topic)
    if existing is not None and existing.error is None:
        if len(existing.partitions) != partitions:
            raise ConfigurationError(
                f"topic '{topic}' has {len(existing.partitions)} partitions, the inputs "
                f"{partitions}; delete it (it holds only pending retries, budget claims "
                "of the last days or the last hour's model streams) and restart"
            )
        return
    future = admin.create_topics(
        [internal_topic(settings, topic, partitions=partitions, config=config)],
        request_timeout=settings.connect_timeout_s,
    )[topic]
    try:
        future.result(timeout=settings.connect_timeout_s)
    except KafkaException as exc:
        if is_authorization_failure(exc.args[0]):
            raise authorization_error(
                settings, exc.args[0], operation="CREATE", resource=topic
            ) from exc
        if "already exists" not in str(exc).lower():  # another instance won the race
            raise
