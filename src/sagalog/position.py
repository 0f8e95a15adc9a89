"""Where a record sits in the log: topic, partition and offset, as one typed value.

A position travels as text in places that outlive the process: the
``sagalog_origin`` header of a retried or dead-lettered record (where the event was
first consumed, so a retry's outputs go back to that topic, its parking entry names
that offset, and an operator finds the original), and an effect ledger entry's
``delivery`` (which record's handling confirmed the effect). All use
``topic/partition/offset``; this module is the one place that writes and reads that
text, so no caller splits strings. A leaf of the package: the agent runtime and the
tracker service both dead-letter records.

A ``NamedTuple`` rather than a dataclass: the state store keeps first sightings as
plain sequences and compares them with the position of the record in hand, and the
hot path builds one per consumed record.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sagalog.errors import EventValidationError


class RecordPosition(NamedTuple):
    """One record's place in the log."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @classmethod
    def of(cls, message: Any) -> RecordPosition:
        """The position of a consumed record (confluent-kafka's accessors are Optional
        by their stubs, but a record without an error always has all three)."""
        return cls(str(message.topic()), int(message.partition() or 0), int(message.offset() or 0))

    @classmethod
    def parse(cls, text: str) -> RecordPosition:
        """Read ``topic/partition/offset`` as ``str`` writes it.

        Kafka topic names cannot contain ``/``, so the last two fields are split off
        the right and everything before them is the topic.

        Raises:
            EventValidationError: ``text`` is not a position (a header edited by
                hand, or written by something other than sagalog).
        """
        topic, sep1, rest = text.rpartition("/")
        topic, sep2, partition = topic.rpartition("/")
        try:
            if not (sep1 and sep2 and topic):
                raise ValueError(text)
            position = cls(topic, int(partition), int(rest))
            if position.partition < 0 or position.offset < 0:
                raise ValueError(text)
            return position
        except ValueError:
            raise EventValidationError(
                f"record position {text!r} is not 'topic/partition/offset'"
            ) from None
