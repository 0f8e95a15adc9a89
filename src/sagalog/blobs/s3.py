"""Blobs in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2, ...): ``<prefix>ab/abcdef...``.

The same contract as the local store: an object is named by the sha256 of its bytes,
written once (a whole object already there is not written again), and every read is
checked against the reference, so a store that changed or lost a blob is caught by
the reader and by ``sagalog audit --verify``. S3 writes an object whole or not at
all, so no temporary name is needed.

boto3 is the client: the ecosystem's standard, with the credential chain every
operator already configures (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a
profile, an instance role). Its newer default of checksumming every request with a
streamed CRC (``aws-chunked``) is turned down to "when required": several
S3-compatible servers refuse that encoding, and the sha256 check on read covers
integrity end to end.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import urlparse

from sagalog.blobs.store import BlobMissing, BlobRef
from sagalog.errors import ConfigurationError, ServiceUnavailableError

_MD5 = re.compile(r"^[0-9a-f]{32}$")


class S3BlobStore:
    """Blobs as objects under ``prefix`` in ``bucket``."""

    def __init__(self, bucket: str, prefix: str = "", *, client: Any) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = client

    @classmethod
    def from_url(cls, url: str, *, endpoint_url: str | None = None) -> S3BlobStore:
        """The store ``s3://bucket/prefix`` names, through ``endpoint_url`` for a store
        other than AWS.

        Raises:
            ConfigurationError: the URL is not ``s3://<bucket>[/<prefix>]``.
        """
        parsed = urlparse(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ConfigurationError(
                f"blob store URL {url!r} is not s3://<bucket>[/<prefix>]: set "
                "SAGALOG_BLOB_URL to e.g. s3://sagalog-blobs/procurement"
            )
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            config=Config(
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                retries={"mode": "standard", "max_attempts": 5},
            ),
        )
        return cls(parsed.netloc, parsed.path, client=client)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key_of(self, ref: BlobRef) -> str:
        return f"{self.prefix}{ref.sha256[:2]}/{ref.sha256}"

    def put(self, data: bytes, media_type: str) -> BlobRef:
        """Store ``data`` (once: an object already there whole is not written again)."""
        ref = BlobRef.of(data, media_type)
        key = self.key_of(ref)
        try:
            if self._intact(key, ref, data):
                return ref
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=data,
                ContentType=media_type,
                Metadata={"sha256": ref.sha256},
            )
        except Exception as exc:
            raise self._failure(exc, key) from exc
        return ref

    def get(self, ref: BlobRef) -> bytes:
        """The bytes of ``ref``, checked against its hash and size.

        Raises:
            BlobMissing: the bucket has no such object.
            BlobModified: the object does not hash to the reference.
            ServiceUnavailableError: the store did not answer.
        """
        key = self.key_of(ref)
        try:
            data: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                raise BlobMissing(
                    f"{ref} is missing from the blob store {self} (no object {key}): restore "
                    "it from the bucket's versions or a backup, or point SAGALOG_BLOB_URL at "
                    "the store the writer used"
                ) from None
            raise self._failure(exc, key) from exc
        return ref.verified(data, f"{self}{key.removeprefix(self.prefix)}", "a version or a backup")

    def _intact(self, key: str, ref: BlobRef, data: bytes) -> bool:
        """Whether the object is there whole, without reading it back: its size, the
        sha256 we stated when writing it, and, where the store's ETag is the MD5 of the
        bytes (a single-part upload without KMS, on AWS and most compatible stores),
        that MD5, so an object overwritten behind the store's back is written again."""
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        # Metadata names are case-insensitive HTTP headers: some stores say "Sha256".
        metadata = {k.lower(): v for k, v in (head.get("Metadata") or {}).items()}
        stated = metadata.get("sha256")
        if head.get("ContentLength") != ref.size or stated != ref.sha256:
            return False
        etag = str(head.get("ETag", "")).strip('"')
        if _MD5.match(etag):
            return etag == hashlib.md5(data, usedforsecurity=False).hexdigest()
        return True

    def _failure(self, exc: Exception, key: str) -> Exception:
        code = _code(exc)
        if code == "NoSuchBucket":
            return ConfigurationError(
                f"the blob store's bucket {self.bucket!r} does not exist: create it, or "
                "fix SAGALOG_BLOB_URL"
            )
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
            return ConfigurationError(
                f"the blob store refused {key} in {self.bucket!r} ({code}): check the "
                "credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the profile) and "
                "the bucket policy"
            )
        return ServiceUnavailableError(f"the blob store {self} failed on {key}: {exc}")


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""
