"""Blobs: the content-addressed store and the walk that finds blob fields by schema."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import fastavro
import pytest

from sagalog.blobs.fields import admits_blobs, inline, offload, refs_in
from sagalog.blobs.store import (
    BlobMissing,
    BlobModified,
    BlobRef,
    LocalBlobStore,
    blob_ref_schema,
)
from sagalog.errors import EventValidationError

TEXT = "text/plain; charset=utf-8"

#: A model call's event: the prompt inline or by reference, retrieved documents each
#: with a text that may be a blob, and a note that is never one.
CALL = {
    "type": "record",
    "name": "ModelCalled",
    "namespace": "filings.v1",
    "fields": [
        {"name": "model", "type": "string"},
        {"name": "prompt", "type": ["string", blob_ref_schema()]},
        {
            "name": "documents",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Document",
                    "fields": [
                        {"name": "title", "type": "string"},
                        {"name": "text", "type": ["null", "string", "sagalog.v1.BlobRef"]},
                    ],
                },
            },
        },
        {"name": "answer", "type": "sagalog.v1.BlobRef"},
        {"name": "note", "type": {"type": "map", "values": "string"}},
    ],
}


@pytest.fixture
def store(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


def test_a_blob_is_named_by_its_hash_and_stored_once(store: LocalBlobStore) -> None:
    data = b"a prompt " * 1000

    ref = store.put(data, TEXT)
    again = store.put(data, TEXT)

    assert ref == again
    assert ref == BlobRef(sha256=hashlib.sha256(data).hexdigest(), size=len(data), media_type=TEXT)
    assert store.get(ref) == data
    assert [p.name for p in store.root.rglob("*") if p.is_file()] == [ref.sha256]


def test_a_missing_blob_is_named_with_the_store(store: LocalBlobStore) -> None:
    ref = BlobRef.of(b"never stored", TEXT)

    with pytest.raises(BlobMissing, match=rf"blob {ref.sha256[:16]}.*missing from the blob store"):
        store.get(ref)


@pytest.mark.parametrize("tamper", [b"A prompt", b"a prompt, longer"])
def test_a_changed_blob_is_caught_by_its_hash(store: LocalBlobStore, tamper: bytes) -> None:
    ref = store.put(b"a prompt", TEXT)
    store.path_of(ref).write_bytes(tamper)

    with pytest.raises(BlobModified, match="was modified in the blob store"):
        store.get(ref)


def test_a_damaged_blob_is_written_again_by_the_next_put(store: LocalBlobStore) -> None:
    ref = store.put(b"a prompt", TEXT)
    store.path_of(ref).write_bytes(b"half")

    store.put(b"a prompt", TEXT)

    assert store.get(ref) == b"a prompt"
    assert not [p for p in store.root.rglob(".incoming-*")]


@pytest.mark.parametrize("name", ["../../etc/passwd", "ABCDEF" * 11, "ab" * 31])
def test_a_reference_that_is_not_a_hash_never_becomes_a_path(name: str) -> None:
    with pytest.raises(EventValidationError, match="sha256: String should match pattern"):
        BlobRef.from_avro({"sha256": name, "size": 1, "media_type": TEXT})


def test_a_record_without_the_fields_of_a_reference_is_refused() -> None:
    with pytest.raises(EventValidationError, match=r"not a blob reference .*size: Field required"):
        BlobRef.from_avro({"sha256": "00" * 32})


def _call(store: LocalBlobStore) -> dict[str, Any]:
    return {
        "model": "stand-in",
        "prompt": "short",
        "documents": [
            {"title": "a", "text": None},
            {"title": "b", "text": "x" * 500},
            {"title": "c", "text": "small"},
        ],
        "answer": store.put(b"the answer", TEXT).as_avro(),
        "note": {"sha256": "not a reference: the field is a map of strings"},
    }


def test_offload_keeps_small_payloads_inline_and_stores_the_rest(store: LocalBlobStore) -> None:
    event = _call(store)

    stored = offload(CALL, event, store, threshold=100)

    assert stored["prompt"] == "short"
    assert stored["documents"][0]["text"] is None
    assert stored["documents"][1]["text"] == BlobRef.of(b"x" * 500, TEXT).as_avro()
    assert stored["documents"][2]["text"] == "small"
    assert stored["note"] == event["note"]
    assert event["documents"][1]["text"] == "x" * 500, "the caller's datum is not changed"


def test_references_are_found_by_schema_with_their_paths(store: LocalBlobStore) -> None:
    stored = offload(CALL, _call(store), store, threshold=100)

    found = refs_in(CALL, stored)

    assert [(path, ref.size) for path, ref in found] == [
        ("documents[1].text", 500),
        ("answer", len(b"the answer")),
    ]


def test_inline_gives_back_what_was_offloaded(store: LocalBlobStore) -> None:
    event = _call(store)
    stored = offload(CALL, event, store, threshold=100)

    back = inline(CALL, stored, store)

    assert back["documents"] == event["documents"]
    assert back["answer"] == "the answer"


def test_the_schema_encodes_inline_and_referenced_payloads(store: LocalBlobStore) -> None:
    """fastavro picks the union branch: the walk's output is what the codec writes."""
    parsed = fastavro.parse_schema(CALL)
    stored = offload(CALL, _call(store), store, threshold=100)
    out = io.BytesIO()

    fastavro.schemaless_writer(out, parsed, stored)
    read = fastavro.schemaless_reader(io.BytesIO(out.getvalue()), parsed, parsed)

    assert [path for path, _ in refs_in(CALL, read)] == ["documents[1].text", "answer"]
    assert len(out.getvalue()) < 300, "the 500-byte document travels as its reference"


def test_a_binary_payload_is_stored_as_bytes_and_given_back_as_bytes(
    store: LocalBlobStore,
) -> None:
    schema = {
        "type": "record",
        "name": "Scan",
        "fields": [{"name": "image", "type": ["bytes", blob_ref_schema()]}],
    }
    image = bytes(range(256)) * 4

    stored = offload(schema, {"image": image}, store, threshold=100)

    assert stored["image"]["media_type"] == "application/octet-stream"
    assert inline(schema, stored, store) == {"image": image}


def test_which_schemas_admit_blobs_is_read_from_the_schema_alone() -> None:
    assert admits_blobs(CALL)
    assert admits_blobs({"type": "array", "items": ["null", "sagalog.v1.BlobRef"]})
    assert not admits_blobs(
        {"type": "record", "name": "Plain", "fields": [{"name": "text", "type": "string"}]}
    )
