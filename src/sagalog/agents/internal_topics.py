"""The agent's own topics: checked and, for the retry topic, created at start.

Inputs and the dead-letter topic belong to the topology (``topology/*.yaml``); an
agent refuses to start when one is missing rather than creating it with guessed
settings. The retry topic is internal to the agent, like a stream processor's
changelog: the runtime creates it with as many partitions as the inputs, so partition
i of the inputs and of the retry topic land on the same instance.
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import KafkaException

from sagalog.authorization import authorization_error, is_authorization_failure, topic_denied
from sagalog.cluster import connect_admin, internal_topic
from sagalog.errors import ConfigurationError
from sagalog.settings import ClientSettings

RETRY_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(7 * 86_400_000)}


def ensure_internal_topics(
    settings: ClientSettings,
    *,
    inputs: Sequence[str],
    retry_topic: str,
    deadletter_topic: str,
) -> int:
    """Check the inputs and the dead-letter topic, create the retry topic if missing.

    Returns:
        The inputs' partition count.

    Raises:
        ConfigurationError: an input or the dead-letter topic does not exist, or the
            inputs differ in partition count (their workflows would not be co-located).
        AuthorizationError: this principal may not see one of them or create the retry
            topic (its ACLs are not applied: ``sagalog topology apply``).
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
    existing = metadata.topics.get(retry_topic)
    if existing is not None and existing.error is None:
        if len(existing.partitions) != partitions:
            raise ConfigurationError(
                f"retry topic '{retry_topic}' has {len(existing.partitions)} partitions, the "
                f"inputs {partitions}; delete it (it holds only pending retries) and restart"
            )
        return partitions
    future = admin.create_topics(
        [internal_topic(settings, retry_topic, partitions=partitions, config=RETRY_TOPIC_CONFIG)],
        request_timeout=settings.connect_timeout_s,
    )[retry_topic]
    try:
        future.result(timeout=settings.connect_timeout_s)
    except KafkaException as exc:
        if is_authorization_failure(exc.args[0]):
            raise authorization_error(
                settings, exc.args[0], operation="CREATE", resource=retry_topic
            ) from exc
        if "already exists" not in str(exc).lower():  # another instance won the race
            raise
    return partitions
