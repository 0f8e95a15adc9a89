"""The blob store in an S3-compatible bucket, against a real S3 API (gofakes3)."""

from __future__ import annotations

import pytest

from sagalog.blobs.s3 import S3BlobStore
from sagalog.blobs.store import BlobMissing, BlobModified
from sagalog.errors import ConfigurationError
from sagalog.settings import ClientSettings

from .s3_server import S3Server, s3_server  # noqa: F401

pytestmark = pytest.mark.tool("gofakes3")

TEXT = "text/plain; charset=utf-8"


def test_a_blob_is_written_once_read_back_checked_and_a_change_or_loss_is_caught(
    s3_server: S3Server,  # noqa: F811
) -> None:
    store = S3BlobStore.from_url(
        f"s3://{s3_server.bucket}/prompts/", endpoint_url=s3_server.endpoint_url
    )
    prompt = ("Score the risk of this purchase request. " * 3000).encode()
    ref = store.put(prompt, TEXT)
    assert store.get(ref) == prompt
    key = store.key_of(ref)
    assert key == f"prompts/{ref.sha256[:2]}/{ref.sha256}"
    head = store.client.head_object(Bucket=s3_server.bucket, Key=key)
    assert head["ContentType"] == TEXT
    assert {k.lower(): v for k, v in head["Metadata"].items()} == {"sha256": ref.sha256}

    # Written once: a second put of the same bytes leaves the object as it was.
    assert store.put(prompt, TEXT) == ref
    again = store.client.head_object(Bucket=s3_server.bucket, Key=key)
    assert again["LastModified"] == head["LastModified"] and again["ETag"] == head["ETag"]

    # Changed behind the store's back: the reader refuses it, and a put mends it.
    store.client.put_object(Bucket=s3_server.bucket, Key=key, Body=prompt[:-1] + b"!")
    with pytest.raises(BlobModified, match="was modified in the blob store"):
        store.get(ref)
    store.put(prompt, TEXT)
    assert store.get(ref) == prompt

    store.client.delete_object(Bucket=s3_server.bucket, Key=key)
    with pytest.raises(BlobMissing, match=f"no object {key}"):
        store.get(ref)


def test_the_settings_choose_one_store_and_refuse_a_wrong_bucket_or_url(
    s3_server: S3Server,  # noqa: F811
) -> None:
    settings = ClientSettings(
        blob_url=f"s3://{s3_server.bucket}", blob_endpoint_url=s3_server.endpoint_url
    )
    store = settings.blob_store()
    assert isinstance(store, S3BlobStore) and str(store) == f"s3://{s3_server.bucket}/"
    with pytest.raises(ConfigurationError, match="both SAGALOG_BLOB_DIR"):
        settings.model_copy(update={"blob_dir": "/tmp/blobs"}).blob_store()
    with pytest.raises(ConfigurationError, match=r"is not s3://<bucket>"):
        ClientSettings(blob_url="https://bucket/prefix").blob_store()
    missing = S3BlobStore.from_url("s3://no-such-bucket", endpoint_url=s3_server.endpoint_url)
    with pytest.raises(ConfigurationError, match="'no-such-bucket' does not exist"):
        missing.put(b"x", TEXT)
