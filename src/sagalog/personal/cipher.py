"""Seal an event's personal fields before it is encoded; open them where a reader may.

Writers seal: a marked field's plaintext becomes an envelope under its subject's key,
and a value that already is an envelope (or shows as erased) passes through unchanged,
so an agent that copies a requester from its input to its output needs no key at all.
Readers open only where they are entitled to: the CLI's views (``tail``, ``audit``,
``replay``, ``analytics``, what-if) reveal every marked field, showing ``ERASED`` for a
subject whose keys were erased; a handler opens one value with ``ctx.personal``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sagalog.errors import PersonalDataError
from sagalog.personal.envelope import ERASED, open_envelope, parse, seal
from sagalog.personal.fields import PersonalField
from sagalog.personal.keys import LocalKeyService

if TYPE_CHECKING:
    from sagalog.personal.ring import SubjectKeys
    from sagalog.settings import ClientSettings


class PersonalData:
    """Seals and opens personal fields with the subjects' keys.

    Args:
        keys: the subjects' keys (the key topic).
        reveal: whether decoding opens every marked field (the CLI's views), or leaves
            the envelopes for ``open_value`` (services: need to know).
    """

    def __init__(self, keys: SubjectKeys, *, reveal: bool) -> None:
        self.keys = keys
        self.reveal = reveal

    def subject_id(self, value: str) -> str:
        """The subject id of the subject ``value`` identifies (what ``sagalog erase`` takes)."""
        return self.keys.service.subject_id(value)

    def digest(self, data: bytes) -> str:
        """A keyed digest of ``data``, which may hold personal data (``KeyService.digest``)."""
        return self.keys.service.digest(data)

    def seal_fields(
        self, fields: Sequence[PersonalField], datum: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """``datum`` with each marked field's plaintext sealed (a copy when any was)."""
        sealed: dict[str, Any] | None = None
        for field in fields:
            value = datum.get(field.name)
            if value is None or value == ERASED or parse(value) is not None:
                continue
            subject = self._subject(datum, field)
            key_id, key = self.keys.writing_key(subject)
            if sealed is None:
                sealed = dict(datum)
            sealed[field.name] = seal(key, subject=subject, key_id=key_id, plaintext=value)
        return datum if sealed is None else sealed

    def open_fields(
        self, fields: Sequence[PersonalField], payload: dict[str, Any]
    ) -> dict[str, Any]:
        """``payload`` with each marked field opened, or ``ERASED`` (in place)."""
        for field in fields:
            value = payload.get(field.name)
            if parse(value) is not None:
                payload[field.name] = self.open_value(value)
        return payload

    def open_value(self, value: Any) -> Any:
        """The plaintext of an envelope, ``ERASED`` when its subject's keys were erased,
        and any other value as it is.

        Raises:
            PersonalDataError: the envelope does not open under its key (altered).
        """
        envelope = parse(value)
        if envelope is None:
            return value
        key = self.keys.reading_key(envelope.subject, envelope.key_id)
        return ERASED if key is None else open_envelope(key, envelope)

    def close(self) -> None:
        self.keys.close()

    def _subject(self, datum: Mapping[str, Any], field: PersonalField) -> str:
        value = datum.get(field.subject_field)
        envelope = parse(value)
        if envelope is not None:
            return envelope.subject
        if not isinstance(value, str) or not value or value == ERASED:
            raise PersonalDataError(
                f"field '{field.name}' is personal data of the subject in "
                f"'{field.subject_field}', which is {value!r}: a sealed value needs its subject"
            )
        return self.keys.service.subject_id(value)


def personal_data(settings: ClientSettings, *, reveal: bool = False) -> PersonalData | None:
    """The personal-data sealer of ``settings`` (``SAGALOG_PERSONAL_DATA_KEY_FILE``), or
    None when none is configured; nothing connects to Kafka until the first seal or open.

    Raises:
        PersonalDataError: the key file or KEK set file is configured but missing or
            unreadable.
    """
    if not settings.personal_data_key_file:  # unset, or set empty to turn it off
        return None
    # The key topic's Kafka clients load here, where keys are used: a handler's context
    # (and a flow run in memory with it) holds a ``PersonalData`` without them.
    from sagalog.personal.ring import SubjectKeys

    service = LocalKeyService.load(
        settings.personal_data_key_file, kek_file=settings.personal_data_kek_file
    )
    return PersonalData(SubjectKeys(settings, service), reveal=reveal)
