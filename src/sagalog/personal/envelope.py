"""One personal value, encrypted: ``pd1:<subject id>:<key id>:<nonce and ciphertext>``.

AES-256-GCM from ``cryptography`` (no cipher written here), under the subject's data
key. The subject id and key id are the associated data, so an envelope moved to
another subject's key fails to open rather than decrypting to a wrong person. The
envelope is text, so a marked ``string`` field keeps its Avro type and every schema
stays compatible; a reader with no key sees the envelope, a reader whose key was
erased sees ``ERASED``.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sagalog.errors import PersonalDataError

ERASED = "[erased]"
"""What a reader shows for a value whose subject was erased."""

_PREFIX = "pd1:"
_SHAPE = re.compile(r"^pd1:([0-9a-f]{32}):([0-9a-f]{16}):([A-Za-z0-9_-]+)$")
_NONCE_BYTES = 12
_TAG_BYTES = 16


@dataclass(frozen=True, slots=True)
class Envelope:
    """A parsed envelope: whose it is, under which of the subject's keys, and the bytes."""

    subject: str
    key_id: str
    sealed: bytes


def seal(data_key: bytes, *, subject: str, key_id: str, plaintext: str) -> str:
    """``plaintext`` as an envelope under ``data_key`` (a fresh random nonce each time)."""
    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(data_key).encrypt(nonce, plaintext.encode(), _associated(subject, key_id))
    text = base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode()
    return f"{_PREFIX}{subject}:{key_id}:{text}"


def parse(value: object) -> Envelope | None:
    """The envelope ``value`` is, or None when it is not one (plain text, null)."""
    if not isinstance(value, str) or not value.startswith(_PREFIX):
        return None
    match = _SHAPE.match(value)
    if match is None:
        return None
    text = match.group(3)
    try:
        sealed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:  # a length base64 cannot have: not an envelope
        return None
    if len(sealed) < _NONCE_BYTES + _TAG_BYTES:
        return None
    return Envelope(match.group(1), match.group(2), sealed)


def open_envelope(data_key: bytes, envelope: Envelope) -> str:
    """The plaintext of ``envelope``.

    Raises:
        PersonalDataError: the bytes do not open under this key (altered, or another
            subject's key): never returned as if it were the value.
    """
    nonce, sealed = envelope.sealed[:_NONCE_BYTES], envelope.sealed[_NONCE_BYTES:]
    try:
        plain = AESGCM(data_key).decrypt(
            nonce, sealed, _associated(envelope.subject, envelope.key_id)
        )
    except (InvalidTag, ValueError):  # ValueError: a nonce or tag cut short
        raise PersonalDataError(
            f"personal-data envelope of subject {envelope.subject} (key {envelope.key_id}) "
            "does not open under its key: the record was altered, or the key topic holds "
            "a different key under that id"
        ) from None
    return plain.decode()


def _associated(subject: str, key_id: str) -> bytes:
    return f"{subject}:{key_id}".encode()
