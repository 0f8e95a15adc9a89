"""The key-encryption keys (KEKs) that wrap each subject's data key, and subject naming.

``KeyService`` is the seam for a key management service: it wraps and unwraps data
keys and turns a subject's identifying value (an e-mail address) into the opaque
subject id the envelopes and the key topic carry. ``LocalKeyService`` keeps two kinds
of secret in files (mode 0600):

- the *naming secret* (``SAGALOG_PERSONAL_DATA_KEY_FILE``), from which HKDF derives
  the subject-naming key, the digest key and the service id. It never rotates: a
  subject id is written in every envelope, so a new naming key would orphan them all.
- the *KEK set* (``SAGALOG_PERSONAL_DATA_KEK_FILE``, ``KekSet``): named KEKs, one of
  them ``current``, which wraps every new data key. ``sagalog keys rotate`` re-wraps
  the others' records under it (``sagalog.personal.rotation``).

Before KEK sets, the wrapping key was derived from the naming secret too. That key
stays readable as the KEK ``v0``: a record written then is exactly a nonce and a
ciphertext (60 bytes) with no KEK id in it, so its id can only be implied, and the id
``v0`` is reserved for it. With no KEK set configured, ``v0`` is also the current
KEK, so a deployment that never rotates writes what it always wrote. Every record a
named KEK wraps starts ``k:<kek id>:``, so a reader knows which KEK to ask, and
several KEKs can be live while a rotation runs. The topic holds only wrapped keys and
keyed hashes: a copy of it without the files reveals neither the keys nor whose they are.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from sagalog.errors import PersonalDataError

_KEY_BYTES = 32
_NONCE_BYTES = 12
_TAG_BYTES = 16
_LEGACY_BYTES = _NONCE_BYTES + _KEY_BYTES + _TAG_BYTES
"""A record wrapped by ``v0``: nonce and ciphertext of a data key, nothing else."""

LEGACY_KEK = "v0"
"""The KEK derived from the naming secret, which wrapped every key before KEK sets."""

_KEK_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,31}$")
_NAMED_PREFIX = b"k:"


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

    @property
    def current_kek(self) -> str:
        """The id of the KEK that wraps every new data key (``LEGACY_KEK`` without a set)."""
        ...

    def kek_of(self, wrapped: bytes) -> str:
        """The id of the KEK that wrapped ``wrapped`` (read from the record, no key needed).

        Raises:
            PersonalDataError: the record has neither shape, or names a KEK this
                service does not hold.
        """
        ...

    def wrap(self, subject: str, key_id: str, data_key: bytes) -> bytes:
        """``data_key`` encrypted under the current KEK, for storage in the key topic."""
        ...

    def unwrap(self, subject: str, key_id: str, wrapped: bytes) -> bytes:
        """The data key ``wrapped`` holds.

        Raises:
            PersonalDataError: it was not wrapped by this service for that subject and id.
        """
        ...


class LocalKeyService:
    """A ``KeyService`` over one secret in a local file."""

    def __init__(self, secret: bytes, *, origin: str, keks: KekSet | None = None) -> None:
        if len(secret) != _KEY_BYTES:
            raise PersonalDataError(
                f"the personal-data key in {origin} is {len(secret)} bytes, not {_KEY_BYTES}: "
                "it is not a key this service wrote; restore the right file"
            )
        self.origin = origin
        self.keks = keks
        self._legacy = AESGCM(_derive(secret, b"sagalog personal-data wrapping"))
        self._named = {} if keks is None else {i: AESGCM(k) for i, k in keks.keys.items()}
        self._current = LEGACY_KEK if keks is None else keks.current
        self._naming = _derive(secret, b"sagalog personal-data subjects")
        self._digests = _derive(secret, b"sagalog personal-data digests")
        self._service_id = _derive(secret, b"sagalog personal-data key id")[:8].hex()

    @property
    def service_id(self) -> str:
        return self._service_id

    @property
    def current_kek(self) -> str:
        return self._current

    @classmethod
    def load(
        cls, path: str | Path, *, create: bool = False, kek_file: str | Path | None = None
    ) -> LocalKeyService:
        """The service over the naming secret in ``path`` and the KEK set in
        ``kek_file`` (none: ``v0`` wraps); with ``create``, a new naming secret is
        written to ``path`` first if the file does not exist (atomically, so two
        processes racing to create it agree on one key).

        Raises:
            PersonalDataError: a file is missing (and not to be created) or unreadable.
        """
        keks = None if not kek_file else KekSet.load(kek_file)
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
        return cls(secret, origin=str(path), keks=keks)

    def subject_id(self, value: str) -> str:
        return hmac.new(self._naming, value.encode(), hashlib.sha256).hexdigest()[:32]

    def digest(self, data: bytes) -> str:
        return hmac.new(self._digests, data, hashlib.sha256).hexdigest()

    def kek_of(self, wrapped: bytes) -> str:
        if len(wrapped) == _LEGACY_BYTES:
            return LEGACY_KEK
        kek_id = _named_kek(wrapped)
        if kek_id is None:
            raise PersonalDataError(
                f"a record of {len(wrapped)} bytes in the key topic is no wrapped key: "
                "neither a v0 record nor one naming its KEK; the topic was written by "
                "something else"
            )
        if kek_id not in self._named:
            where = self.keks.origin if self.keks is not None else "SAGALOG_PERSONAL_DATA_KEK_FILE"
            raise PersonalDataError(
                f"the key topic holds data keys wrapped by KEK '{kek_id}', which {where} "
                f"does not hold: add KEK '{kek_id}' to {where} (every service of these "
                "workflows needs every KEK that is live until `sagalog keys rotate` is done)"
            )
        return kek_id

    def wrap(self, subject: str, key_id: str, data_key: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        if self._current == LEGACY_KEK:
            return nonce + self._legacy.encrypt(nonce, data_key, _bound(subject, key_id))
        sealed = self._named[self._current].encrypt(
            nonce, data_key, _bound(subject, key_id, self._current)
        )
        return _NAMED_PREFIX + self._current.encode() + b":" + nonce + sealed

    def unwrap(self, subject: str, key_id: str, wrapped: bytes) -> bytes:
        kek_id = self.kek_of(wrapped)
        if kek_id == LEGACY_KEK:
            cipher, body, bound = self._legacy, wrapped, _bound(subject, key_id)
        else:
            cipher = self._named[kek_id]
            body = wrapped[len(_NAMED_PREFIX) + len(kek_id) + 1 :]
            bound = _bound(subject, key_id, kek_id)
        try:
            return cipher.decrypt(body[:_NONCE_BYTES], body[_NONCE_BYTES:], bound)
        except (InvalidTag, ValueError):  # ValueError: a record cut short
            origin = self.origin if kek_id == LEGACY_KEK else self._kek_origin()
            raise PersonalDataError(
                f"the key topic's key {key_id} of subject {subject} was not wrapped by the "
                f"key in {origin} (KEK '{kek_id}'): the services do not share one key file"
            ) from None

    def _kek_origin(self) -> str:
        return self.keks.origin if self.keks is not None else self.origin


@dataclass(frozen=True)
class KekSet:
    """Named key-encryption keys, one of them ``current``: the KEK set file.

    The file is JSON, mode 0600, written by ``sagalog keys add-kek``::

        {"current": "2026-12", "keys": {"2026-12": "<base64 of 32 bytes>"}}
    """

    current: str
    keys: dict[str, bytes] = field(repr=False)
    origin: str = "<memory>"

    def __post_init__(self) -> None:
        problem = kek_set_problem(self.current, self.keys)
        if problem:
            raise PersonalDataError(f"the KEK set file {self.origin}: {problem}")

    @classmethod
    def load(cls, path: str | Path) -> KekSet:
        """The KEK set in ``path``.

        Raises:
            PersonalDataError: the file is missing, not the JSON shape above, or its
                ``current`` names no key in it; the message names the file and the fix.
        """
        path = Path(path)
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            current = document["current"]
            keys = {
                str(kek_id): base64.b64decode(text, validate=True)
                for kek_id, text in document["keys"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            reason = f"no {exc} entry" if isinstance(exc, KeyError) else str(exc)
            raise PersonalDataError(
                f"cannot read the KEK set file {path}: {reason}. It is JSON "
                '{"current": "<id>", "keys": {"<id>": "<base64 of 32 bytes>"}}: write '
                "it with `sagalog keys add-kek <id> --current`, and point "
                "SAGALOG_PERSONAL_DATA_KEK_FILE at the file every service shares"
            ) from None
        return cls(current=str(current), keys=keys, origin=str(path))

    def save(self, path: str | Path) -> None:
        """Write the set to ``path`` atomically, readable by its owner only."""
        document = {
            "current": self.current,
            "keys": {i: base64.b64encode(k).decode() for i, k in sorted(self.keys.items())},
        }
        _write_private(Path(path), json.dumps(document, indent=2) + "\n", replace=True)


def kek_set_problem(current: str, keys: dict[str, bytes]) -> str | None:
    """What is wrong with a KEK set, and what to do (None: nothing)."""
    for kek_id, key in keys.items():
        if kek_id == LEGACY_KEK:
            return (
                f"the KEK id '{LEGACY_KEK}' is reserved for the key derived from "
                "SAGALOG_PERSONAL_DATA_KEY_FILE; name the key otherwise"
            )
        if not _KEK_ID.match(kek_id):
            return (
                f"the KEK id {kek_id!r} is not 1-32 of a-z, 0-9, '.', '_', '-' "
                "(starting with a letter or digit); rename it"
            )
        if len(key) != _KEY_BYTES:
            return f"KEK '{kek_id}' is {len(key)} bytes, not {_KEY_BYTES}; restore the right key"
    if current not in keys:
        return (
            f"'current' is {current!r}, which names no key in it; set it to one of "
            f"{sorted(keys)} (`sagalog keys add-kek <id> --current` writes a new one)"
        )
    return None


def new_kek() -> bytes:
    """A fresh 256-bit key-encryption key."""
    return AESGCM.generate_key(bit_length=256)


def _named_kek(wrapped: bytes) -> str | None:
    if not wrapped.startswith(_NAMED_PREFIX):
        return None
    end = wrapped.find(b":", len(_NAMED_PREFIX))
    if end < 0 or len(wrapped) - end - 1 != _LEGACY_BYTES:
        return None
    return wrapped[len(_NAMED_PREFIX) : end].decode(errors="replace")


def _bound(subject: str, key_id: str, kek_id: str | None = None) -> bytes:
    """The associated data: a wrapped key moved to another subject, id or KEK fails."""
    return (f"{subject}:{key_id}" if kek_id is None else f"{subject}:{key_id}:{kek_id}").encode()


def new_data_key() -> tuple[str, bytes]:
    """A fresh key id (16 hex digits) and a 256-bit data key."""
    return os.urandom(8).hex(), AESGCM.generate_key(bit_length=256)


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=_KEY_BYTES, salt=None, info=purpose).derive(
        secret
    )


def _create(path: Path) -> None:
    _write_private(path, base64.b64encode(os.urandom(_KEY_BYTES)).decode() + "\n", replace=False)


def _write_private(path: Path, text: str, *, replace: bool) -> None:
    """Write ``text`` to ``path`` (mode 0600) whole or not at all: with ``replace`` over
    what is there, else only if nothing is (another process that won keeps its key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".personal-key-")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
        os.fsync(fd)
        os.close(fd)
        if replace:
            Path(temporary).replace(path)
        else:
            with contextlib.suppress(FileExistsError):  # another process created it first
                os.link(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
