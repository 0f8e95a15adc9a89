"""Personal data in an immutable log: encrypted per data subject, erased by deleting a key.

A field the schema marks with ``"sagalog.personal": "<subject field>"`` is written as an
envelope (``envelope``): AES-GCM under a data key of its own data subject, the subject
named by a keyed hash of the value in ``<subject field>``. Each data key is stored
wrapped by a key-encryption key (``keys.KeyService``) in a compacted key topic
(``ring.SubjectKeys``), so every instance shares them through Kafka. ``sagalog erase``
tombstones the subject's keys and publishes an audited ``SubjectErased`` event: the
ciphertext stays in the log, and the hash chain, which covers it, still verifies, but
no reader can open it again; readers show the field as ``ERASED``.
"""

from sagalog.personal.envelope import ERASED
from sagalog.personal.fields import ATTRIBUTE, PersonalField, personal_fields, schema_problems

__all__ = ["ATTRIBUTE", "ERASED", "PersonalField", "personal_fields", "schema_problems"]
