"""Replay reads the blobs its events refer to (``sagalog.replay.blobs``): read and
checked against their hash, missing and modified ones named, none read without a
store. Records built in memory with the codec (the decoding tests' registry stand-in)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sagalog.blobs.store import BlobRef, LocalBlobStore
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.replay.blobs import BlobReads

from .test_replay_decoding import Registry

SCORED = "procurement.v1.RiskScored"
PROMPT = b"Score the risk of this request against the policies. " * 500


@dataclass
class Consumed:
    body: bytes
    event_type: str
    at: int

    def value(self) -> bytes:
        return self.body

    def headers(self) -> list[tuple[str, bytes]]:
        return [("ce_type", self.event_type.encode()), ("ce_id", f"e-{self.at}".encode())]

    def topic(self) -> str:
        return "procurement.events"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.at


@pytest.fixture
def codec(catalog: SchemaCatalog) -> EventCodec:
    return EventCodec(catalog=catalog, registry=Registry(catalog))  # type: ignore[arg-type]


def scored(codec: EventCodec, at: int, prompt: Any) -> Consumed:
    datum = {
        "request_id": "PR-1",
        "score": 0.2,
        "level": "LOW",
        "rationale": "ok",
        "factors": [],
        "lineage": {
            "model_id": "m",
            "prompt_hash": "sha256:0",
            "input_refs": [],
            "decided_at": dt.datetime(2026, 12, 6, tzinfo=dt.UTC),
        },
        "prompt": prompt,
    }
    return Consumed(codec.encode("procurement.events", SCORED, datum), SCORED, at)


def test_every_blob_is_read_and_checked_and_a_bad_one_is_named(
    codec: EventCodec, tmp_path: Path
) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    ref = store.put(PROMPT, "text/plain; charset=utf-8")
    other = store.put(b"another prompt, long enough " * 100, "text/plain; charset=utf-8")
    records = [
        scored(codec, 0, ref.as_avro()),
        scored(codec, 1, "a short prompt, inline"),
        scored(codec, 2, other.as_avro()),
    ]
    reads = BlobReads(codec, store)
    reads.see_all(records)
    assert (reads.read, reads.bytes_read, reads.whole) == (2, len(PROMPT) + 2800, True)
    assert reads.lines() == [
        (f"  blobs: 2 read, each as its reference says ({len(PROMPT) + 2800:,} bytes)", False)
    ]

    store.path_of(ref).write_bytes(PROMPT.replace(b"risk", b"RISK", 1))
    store.path_of(other).unlink()
    damaged = BlobReads(codec, store)
    damaged.see_all(records)
    assert (damaged.read, damaged.missing, damaged.modified, damaged.whole) == (0, 1, 1, False)
    named = [(p.problem, p.event_id, p.position, p.field) for p in damaged.problems]
    assert named == [
        ("modified", "e-0", "procurement.events/0@0", "RiskScored.prompt"),
        ("missing", "e-2", "procurement.events/0@2", "RiskScored.prompt"),
    ]
    assert damaged.to_json()["problems"][0]["reason"].startswith("blob ")
    assert any("cannot be replayed whole" in line for line, bad in damaged.lines() if bad)


def test_without_a_store_the_references_are_counted_and_said_unread(codec: EventCodec) -> None:
    ref = BlobRef.of(PROMPT, "text/plain; charset=utf-8")
    reads = BlobReads(codec, None)
    reads.see_all([scored(codec, 0, ref.as_avro())])
    assert (reads.read, reads.unchecked, reads.whole) == (0, 1, True)
    [(line, problem)] = reads.lines()
    assert problem and "1 blob reference(s) not read: no blob store is configured" in line


def test_types_that_hold_no_blob_are_not_decoded(codec: EventCodec) -> None:
    class Opaque(Consumed):
        def value(self) -> bytes:
            raise AssertionError("decoded a record whose type holds no blob")

    reads = BlobReads(codec, None)
    reads.see(Opaque(b"", "procurement.v1.RequestClassified", 0))
    reads.see(Opaque(b"", "no.such.Type", 1))
    assert reads.to_json()["unchecked"] == 0
