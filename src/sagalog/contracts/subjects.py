"""Registry subjects: ``TopicRecordNameStrategy``, ``<topic>-<record full name>``.

Several event types share one workflow topic, so each is registered under a subject
of its topic and its own name (Kleppmann, "Putting several event types in the same
topic"). The rule is set explicitly because confluent-kafka 2.14+ would otherwise
default to an association-based strategy that Apicurio does not serve.

Written here rather than called from ``confluent_kafka.schema_registry``, whose
import alone (an HTTP, OAuth and JOSE stack) costs more CPU than a whole flow run in
memory, which needs the subject and never the client. A unit test holds it equal to
the client's ``topic_record_subject_name_strategy``.
"""

from __future__ import annotations


def subject_for(topic: str, event_type: str) -> str:
    """The registry subject of ``event_type`` on ``topic`` (TopicRecordNameStrategy)."""
    return f"{topic}-{event_type}"
