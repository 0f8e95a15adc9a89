"""Bytes per workflow on the workflow topic with model prompts inline and as blobs.

Issue 24 asks for the ratio with 100 KB prompts. Each workflow here is the part of the
reference workflow a prompt travels in: its ``RequestSubmitted`` and the risk agent's
``RiskScored`` carrying the prompt. They are published twice through the real publisher
(registry, codec, hash chain) to two fresh topics on the running broker, once with the
prompt inline and once offloaded as the agents do it (``sagalog.blobs.fields.offload``).
Both topics are then read back whole, and the key, value and header bytes of every
record are summed. The broker's own on-disk size of each topic is printed too, when its
data directory is on this machine (the dev stack): that figure includes record batching
and compression.

    python -m tests.bench.blobs --workflows 50 --prompt-kb 100
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.blobs.fields import offload
from sagalog.blobs.store import LocalBlobStore
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.subjects import subject_for
from sagalog.devstack.settings import DevStackSettings
from sagalog.publisher import EventPublisher
from sagalog.settings import ClientSettings

REPO = Path(__file__).resolve().parents[2]
SUBMITTED = "procurement.v1.RequestSubmitted"
SCORED = "procurement.v1.RiskScored"
WORDS = ("policy", "contract", "vendor", "amount", "threshold", "risk", "approval", "budget")


def prompt_of(size: int, seed: int) -> str:
    """A prompt of ``size`` bytes of words (text compresses as a real prompt does)."""
    rng = random.Random(seed)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def submitted(index: int) -> dict[str, Any]:
    return {
        "request_id": f"PR-{index:05d}",
        "requester": f"requester{index}@example.com",
        "department": "engineering",
        "title": "Laptops for the new platform team",
        "description": "Six laptops for the engineers joining in March.",
        "amount": "7200.00",
        "currency": "EUR",
        "vendor": "Dell Technologies",
        "priority": "NORMAL",
        "submitted_at": "2026-12-06T09:00:00Z",
    }


def scored(index: int, prompt: str) -> dict[str, Any]:
    return {
        "request_id": f"PR-{index:05d}",
        "score": 0.42,
        "level": "MEDIUM",
        "rationale": "Known vendor, amount above the threshold.",
        "factors": ["amount above the approval threshold"],
        "lineage": {
            "model_id": "openai-compatible:stand-in",
            "prompt_hash": "sha256:" + hashlib.sha256(prompt.encode()).hexdigest(),
            "input_refs": [f"evt-{index}"],
            "decided_at": dt.datetime(2026, 12, 6, 9, 0, 1, tzinfo=dt.UTC).isoformat(),
        },
        "prompt": prompt,
    }


def topic_bytes(settings: ClientSettings, topic: str, expected: int) -> tuple[int, int]:
    """(records, key + value + header bytes) of the whole topic."""
    consumer = Consumer(
        settings.kafka_config(
            **{"group.id": f"bench-blobs-{uuid.uuid4()}", "enable.auto.commit": False}
        )
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    records = total = 0
    deadline = time.monotonic() + 60
    while records < expected and time.monotonic() < deadline:
        for message in consumer.consume(500, 1.0):
            if message.error() is not None:
                continue
            records += 1
            total += len(message.key() or b"") + len(message.value() or b"")
            for name, value in message.headers() or []:
                total += len(name) + len(value or b"")
    consumer.close()
    return records, total


def disk_bytes(topic: str) -> int | None:
    data = DevStackSettings().state_dir / "kafka" / "data" / f"{topic}-0"
    if not data.is_dir():
        return None
    return sum(f.stat().st_size for f in data.glob("*.log"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=50)
    parser.add_argument("--prompt-kb", type=int, default=100)
    args = parser.parse_args()
    settings = ClientSettings()
    catalog = SchemaCatalog.load(REPO / "schemas")
    publisher = EventPublisher(settings, catalog=catalog, source="bench/blobs")
    suffix = uuid.uuid4().hex[:8]
    topics = {"inline": f"bench-blobs-inline.{suffix}", "blob": f"bench-blobs-ref.{suffix}"}
    admin = AdminClient(settings.kafka_config())
    registry = SchemaRegistry(settings)
    for topic in topics.values():
        admin.create_topics([NewTopic(topic, 1, settings.replication_factor)])[topic].result(30)
        for event_type in (SUBMITTED, SCORED):
            registry.register(subject_for(topic, event_type), catalog[event_type])
    schema = catalog[SCORED].definition
    results: dict[str, Any] = {"workflows": args.workflows, "prompt_bytes": args.prompt_kb * 1024}
    with tempfile.TemporaryDirectory() as folder:
        store = LocalBlobStore(folder)
        for index in range(args.workflows):
            prompt = prompt_of(args.prompt_kb * 1024, seed=index)
            for how, topic in topics.items():
                workflow_id = f"wf-{how}-{index}"
                first = publisher.publish(
                    topic, SUBMITTED, submitted(index), workflow_id=workflow_id
                )
                payload = scored(index, prompt)
                if how == "blob":
                    payload = offload(
                        schema, payload, store, threshold=settings.blob_threshold_bytes
                    )
                publisher.publish(
                    topic,
                    SCORED,
                    payload,
                    workflow_id=workflow_id,
                    causation_id=first.headers.id,
                    prev_hash=first.content_hash,
                )
        publisher.close()
        results["blob_store_bytes"] = sum(
            p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()
        )
    for how, topic in topics.items():
        records, total = topic_bytes(settings, topic, 2 * args.workflows)
        results[how] = {
            "records": records,
            "bytes_per_workflow": round(total / args.workflows),
            "disk_bytes_per_workflow": (
                None if (disk := disk_bytes(topic)) is None else round(disk / args.workflows)
            ),
        }
    results["ratio_blob_to_inline"] = round(
        results["blob"]["bytes_per_workflow"] / results["inline"]["bytes_per_workflow"], 4
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
