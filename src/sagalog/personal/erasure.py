"""Erase one data subject: tombstone their keys, then record who erased them and why.

The keys go first: if the process dies before the ``SubjectErased`` event is written,
the subject is already unreadable and running the erasure again writes the record
(with no keys left to delete). The other order could leave an erasure on record whose
keys still open the data.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import PersonalDataError
from sagalog.events import SubjectErased
from sagalog.personal.cipher import personal_data
from sagalog.personal.ring import KEY_TOPIC
from sagalog.publisher import EventPublisher
from sagalog.settings import ClientSettings

ERASURES_TOPIC = "sagalog.erasures"
"""Where erasures are recorded (``topology/topics.yaml``)."""


@dataclass(frozen=True)
class Erasure:
    """What one erasure did: whose keys, which, and where it is recorded."""

    subject_id: str
    key_ids: list[str]
    topic: str
    partition: int
    offset: int


def erase_subject(
    settings: ClientSettings,
    catalog: SchemaCatalog,
    value: str,
    *,
    reason: str,
    requested_by: str,
    topic: str = ERASURES_TOPIC,
) -> Erasure:
    """Erase the subject ``value`` identifies (as the schemas' subject field holds it).

    Raises:
        PersonalDataError: no personal-data key is configured.
        AuthorizationError: this principal may not write the key or erasures topic.
    """
    personal = personal_data(settings)
    if personal is None:
        raise PersonalDataError(
            "no personal-data key is configured, so nothing was sealed by subject and "
            "there is no key to erase: set SAGALOG_PERSONAL_DATA_KEY_FILE to the key file "
            "the writers use"
        )
    publisher = EventPublisher(settings, catalog=catalog, source="sagalog/erase")
    try:
        subject_id = personal.subject_id(value)
        key_ids = personal.keys.erase(subject_id)
        event = SubjectErased(
            subject_id=subject_id,
            key_ids=key_ids,
            key_topic=KEY_TOPIC,
            reason=reason,
            requested_by=requested_by,
        )
        published = publisher.publish_event(topic, event, workflow_id=subject_id)
    finally:
        personal.close()
        publisher.close()
    return Erasure(subject_id, key_ids, topic, published.partition, published.offset)
