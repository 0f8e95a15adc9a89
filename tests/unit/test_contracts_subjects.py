"""sagalog's registry subjects are the registry client's ``TopicRecordNameStrategy``."""

from __future__ import annotations

from confluent_kafka.schema_registry import topic_record_subject_name_strategy
from confluent_kafka.serialization import MessageField, SerializationContext

from sagalog.contracts.subjects import subject_for


def test_a_subject_is_the_clients_topic_record_name_strategy() -> None:
    for topic, event_type in [
        ("procurement.events", "procurement.v1.BudgetReserved"),
        ("orders.events", "sagalog.v1.CompensationRequested"),
    ]:
        context = SerializationContext(topic, MessageField.VALUE)
        expected = topic_record_subject_name_strategy(context, event_type)
        assert subject_for(topic, event_type) == expected
