"""Content-addressed blobs: model payloads kept beside the log, the log keeping the hash.

An AI workflow's prompts, retrieved documents and model answers are large and many:
Temporal's users meet history limits after a few dozen model calls, because every
prompt and answer is stored in the history (temporalio/sdk-python#1890). Here a large
payload goes into a blob store, named by the sha256 of its bytes, and the event holds
only a ``BlobRef``: the hash, the size and the media type. The event's own hash (the
audit chain, ``contracts.hash_chain``) covers the reference, and the reference names
the content, so a blob changed on disk is caught by rehashing it (``audit``), and a
blob written twice is stored once.

The default store is a local directory (``LocalBlobStore``); a shared volume serves
several instances, and an S3-compatible store is the option a cluster would use.
Writes are whole or absent: a blob is written to a temporary file in its directory,
synced and renamed, so a crash leaves no half blob under a valid name.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagalog.errors import EventValidationError, SagalogError

BLOB_REF = "sagalog.v1.BlobRef"
"""The Avro record a schema uses for a field held as a blob (``blob_ref_schema``)."""


class BlobError(SagalogError):
    """A blob the log refers to cannot be given back as it was written."""


class BlobMissing(BlobError):
    """The store has no blob of that hash: it was deleted, or written to another store."""


class BlobModified(BlobError):
    """The stored bytes no longer hash to the reference: the blob was changed."""


class BlobRef(BaseModel):
    """A payload kept in the blob store, named by the sha256 of its bytes.

    What an event holds in place of a large payload; also the type of an event model's
    field that holds one (``prompt: str | BlobRef | None``). Its first paragraph is the
    Avro record's doc (``blob_ref_schema``), as the registry holds it.

    Attributes:
        sha256: the lowercase hex sha256 of the bytes: the blob's name. A reference
            comes from the log, and the log may hold anything: a name that is not a
            hash never becomes a path (``../../etc/passwd``).
        size: its length in bytes (a second check, and what a reader can budget for).
        media_type: how to read it (``text/plain; charset=utf-8``, ``application/json``).
    """

    model_config = ConfigDict(frozen=True)
    avro_namespace: ClassVar[str] = "sagalog.v1"  # the platform's record in any event

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)
    media_type: str

    @classmethod
    def of(cls, data: bytes, media_type: str) -> BlobRef:
        """The reference of ``data``, whichever store keeps it."""
        return cls(sha256=hashlib.sha256(data).hexdigest(), size=len(data), media_type=media_type)

    @classmethod
    def from_avro(cls, datum: Any) -> BlobRef:
        """The reference a decoded ``sagalog.v1.BlobRef`` record holds.

        Raises:
            EventValidationError: a field is missing, or the hash is not 64 lowercase
                hex digits.
        """
        try:
            return cls.model_validate(datum)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()
            )
            raise EventValidationError(
                f"not a blob reference ({problems}): {datum!r:.200}; a sha256 is 64 "
                "lowercase hex digits"
            ) from None

    def as_avro(self) -> dict[str, Any]:
        return self.model_dump()

    def content(self, data: bytes) -> str | bytes:
        """``data`` (this blob's bytes) as the writer had it: text for a ``text/*``
        media type (``offload`` stores text as UTF-8), bytes otherwise."""
        return data.decode("utf-8") if self.media_type.startswith("text/") else data

    def verified(self, data: bytes, where: str, restore: str) -> bytes:
        """``data`` if it is this blob's bytes, as read from ``where`` (a path, an
        object's address); every store checks what it reads the same way.

        Raises:
            BlobModified: ``data`` does not hash to this reference, or is not its size;
                the message says what ``where`` holds and how to get the original
                (``restore``).
        """
        actual = hashlib.sha256(data).hexdigest()
        if actual != self.sha256 or len(data) != self.size:
            raise BlobModified(
                f"{self} was modified in the blob store: {where} holds {len(data):,} bytes "
                f"hashing to {actual[:16]}...; the log's event refers to the original, "
                f"which only {restore} can give back"
            )
        return data

    def __str__(self) -> str:
        return f"blob {self.sha256[:16]}... ({self.size:,} bytes, {self.media_type})"


def blob_ref_schema() -> dict[str, Any]:
    """The Avro record of a ``BlobRef``, to put in a field's type (a union with
    ``string`` holds a payload inline when it is small), generated from the class."""
    from sagalog.contracts.avro_from_model import record_schema

    return record_schema(BlobRef)


class BlobStore(Protocol):
    """Where blobs live. ``put`` is idempotent; ``get`` gives back the bytes or raises."""

    def put(self, data: bytes, media_type: str) -> BlobRef: ...

    def get(self, ref: BlobRef) -> bytes: ...


class LocalBlobStore:
    """Blobs as files under ``root``: ``root/ab/abcdef...`` (the first two hex digits
    fan the files out, as git does, so no directory holds millions)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_of(self, ref: BlobRef) -> Path:
        return self.root / ref.sha256[:2] / ref.sha256

    def put(self, data: bytes, media_type: str) -> BlobRef:
        """Store ``data`` (once: a blob already there whole is not written again)."""
        ref = BlobRef.of(data, media_type)
        path = self.path_of(ref)
        if path.exists() and _intact(path, ref):
            return ref
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            Path(temporary).replace(path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return ref

    def get(self, ref: BlobRef) -> bytes:
        """The bytes of ``ref``, checked against its hash and size.

        Raises:
            BlobMissing: no file of that name.
            BlobModified: the file does not hash to the reference.
        """
        path = self.path_of(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobMissing(
                f"{ref} is missing from the blob store {self.root} (no {path}): restore "
                "it from a backup of that directory, or point the setting at the store "
                "the writer used"
            ) from None
        return ref.verified(data, str(path), "a backup")


def _intact(path: Path, ref: BlobRef) -> bool:
    data = path.read_bytes()
    return len(data) == ref.size and hashlib.sha256(data).hexdigest() == ref.sha256
