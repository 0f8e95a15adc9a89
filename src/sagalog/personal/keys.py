"""The key-encryption key: wraps each subject's data key, and names subjects.

``KeyService`` is the seam for a key management service: it wraps and unwraps data
keys and turns a subject's identifying value (an e-mail address) into the opaque
subject id the envelopes and the key topic carry. ``LocalKeyService`` keeps one
256-bit secret in a file (mode 0600) and derives both from it with HKDF, so the key
topic holds only wrapped keys and keyed hashes: a copy of the topic without the file
reveals neither the keys nor whose they are.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import tempfile
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from sagalog.errors import PersonalDataError

_KEY_BYTES = 32
_NONCE_BYTES = 12


class KeyService(Protocol):
    """Wraps data keys and names subjects; a KMS can stand behind it."""

    @property
    def service_id(self) -> str:
        """Names this key-encryption key in the key topic (16 hex digits), so services
        under different keys share one topic and each reads only its own records."""
        ...

    def subject_id(self, value: str) -> str:
        """The opaque id of the subject ``value`` identifies (32 hex digits)."""
        ...

    def digest(self, data: bytes) -> str:
        """An HMAC-SHA-256 of ``data`` (64 hex digits) under a key of this service: a
        digest of a value that may hold personal data, which nobody without the key
        can test a guess against (an effect's ``arguments_sha256``)."""
        ...

    def wrap(self, subject: str, key_id: str, data_key: bytes) -> bytes:
        """``data_key`` encrypted for storage in the key topic."""
        ...

    def unwrap(self, subject: str, key_id: str, wrapped: bytes) -> bytes:
        """The data key ``wrapped`` holds.

        Raises:
            PersonalDataError: it was not wrapped by this service for that subject and id.
        """
        ...


class LocalKeyService:
    """A ``KeyService`` over one secret in a local file."""

    def __init__(self, secret: bytes, *, origin: str) -> None:
        if len(secret) != _KEY_BYTES:
            raise PersonalDataError(
                f"the personal-data key in {origin} is {len(secret)} bytes, not {_KEY_BYTES}: "
                "it is not a key this service wrote; restore the right file"
            )
        self.origin = origin
        self._wrapping = AESGCM(_derive(secret, b"sagalog personal-data wrapping"))
        self._naming = _derive(secret, b"sagalog personal-data subjects")
        self._digests = _derive(secret, b"sagalog personal-data digests")
        self._service_id = _derive(secret, b"sagalog personal-data key id")[:8].hex()

    @property
    def service_id(self) -> str:
        return self._service_id

    @classmethod
    def load(cls, path: str | Path, *, create: bool = False) -> LocalKeyService:
        """The service over the key in ``path``; with ``create``, a new key is written
        there first if the file does not exist (atomically, so two processes racing to
        create it agree on one key).

        Raises:
            PersonalDataError: the file is missing (and not to be created) or unreadable.
        """
        path = Path(path)
        if create and not path.exists():
            _create(path)
        try:
            text = path.read_text(encoding="ascii").strip()
            secret = base64.b64decode(text, validate=True)
        except (OSError, ValueError) as exc:
            raise PersonalDataError(
                f"cannot read the personal-data key file {path}: {exc}. Point "
                "SAGALOG_PERSONAL_DATA_KEY_FILE at the file every service of these "
                "workflows shares (`sagalog dev env` names the local stack's)"
            ) from None
        return cls(secret, origin=str(path))

    def subject_id(self, value: str) -> str:
        return hmac.new(self._naming, value.encode(), hashlib.sha256).hexdigest()[:32]

    def digest(self, data: bytes) -> str:
        return hmac.new(self._digests, data, hashlib.sha256).hexdigest()

    def wrap(self, subject: str, key_id: str, data_key: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._wrapping.encrypt(nonce, data_key, f"{subject}:{key_id}".encode())

    def unwrap(self, subject: str, key_id: str, wrapped: bytes) -> bytes:
        try:
            return self._wrapping.decrypt(
                wrapped[:_NONCE_BYTES], wrapped[_NONCE_BYTES:], f"{subject}:{key_id}".encode()
            )
        except (InvalidTag, ValueError):  # ValueError: a record cut short
            raise PersonalDataError(
                f"the key topic's key {key_id} of subject {subject} was not wrapped by the "
                f"key in {self.origin}: the services do not share one key file"
            ) from None


def new_data_key() -> tuple[str, bytes]:
    """A fresh key id (16 hex digits) and a 256-bit data key."""
    return os.urandom(8).hex(), AESGCM.generate_key(bit_length=256)


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=_KEY_BYTES, salt=None, info=purpose).derive(
        secret
    )


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = base64.b64encode(os.urandom(_KEY_BYTES)).decode() + "\n"
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".personal-key-")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
        os.fsync(fd)
        os.close(fd)
        with contextlib.suppress(FileExistsError):  # another process created it first
            os.link(temporary, path)
    finally:
        Path(temporary).unlink()
