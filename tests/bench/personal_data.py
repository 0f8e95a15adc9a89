"""What sealing personal data costs: CPU per event to write and to read, bytes per record.

The reference workflow's ``RequestSubmitted`` (its requester's address is personal
data) is published ``--events`` times through the real publisher (registry, codec,
hash chain) to two fresh topics on the running broker: once with no key (the address
in clear) and once sealed under a key file of this run, the keys in the real key
topic, ``--subjects`` requesters in turn. Both topics are then read back whole
through the codec, the sealed one opening every address as ``sagalog tail`` does.
Printed: process CPU per event published and per event read (each pass's CPU time
over its events, the first ``--warmup`` of each pass not counted), and the value
bytes per record. Compare the two columns of one run, as ratios; the machine is
shared and noisy.

    python -m tests.bench.personal_data --events 5000 --subjects 50
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
import uuid
from decimal import Decimal
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.subjects import subject_for
from sagalog.personal.cipher import personal_data
from sagalog.personal.keys import LocalKeyService
from sagalog.publisher import EventPublisher
from sagalog.settings import ClientSettings

REPO = Path(__file__).resolve().parents[2]
EVENT = "procurement.v1.RequestSubmitted"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--subjects", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--sealed-first", action="store_true", help="measure the sealed pass first")
    args = parser.parse_args(argv)
    catalog = SchemaCatalog.load(REPO / "schemas")
    base = ClientSettings(project_dir=str(REPO))
    with tempfile.TemporaryDirectory() as scratch:
        key_file = Path(scratch) / "personal-data.key"
        LocalKeyService.load(key_file, create=True)
        runs = {
            "in clear": base.model_copy(update={"personal_data_key_file": None}),
            "sealed": base.model_copy(update={"personal_data_key_file": str(key_file)}),
        }
        order = list(runs)[::-1] if args.sealed_first else list(runs)
        measured = {name: measure(runs[name], catalog, args) for name in order}
        rows = {name: measured[name] for name in runs}
    print(
        f"{'RequestSubmitted, ' + str(args.events) + ' events':<34}"
        + "".join(f"{name:>14}" for name in rows)
    )
    for label, field in (
        ("publish CPU per event, us", "publish_us"),
        ("publish wall time per event, us", "publish_wall_us"),
        ("read CPU per event, us", "read_us"),
        ("value bytes per record", "bytes"),
    ):
        print(f"{label:<34}" + "".join(f"{rows[name][field]:>14.1f}" for name in rows))
    clear, sealed = rows["in clear"], rows["sealed"]
    print(
        f"ratios sealed/clear: publish {sealed['publish_us'] / clear['publish_us']:.2f}, "
        f"read {sealed['read_us'] / clear['read_us']:.2f}, "
        f"bytes {sealed['bytes'] / clear['bytes']:.2f}"
    )


def measure(
    settings: ClientSettings, catalog: SchemaCatalog, args: argparse.Namespace
) -> dict[str, float]:
    topic = f"bench.personal.{uuid.uuid4().hex[:8]}"
    admin = AdminClient(settings.kafka_config())
    admin.create_topics([NewTopic(topic, 3, settings.replication_factor)])[topic].result(30)
    SchemaRegistry(settings).register(subject_for(topic, EVENT), catalog[EVENT])
    publisher = EventPublisher(settings, catalog=catalog, source="bench/personal")
    payloads = [
        {
            "request_id": f"PR-{n:06d}",
            "requester": f"person{n % args.subjects}@example.com",
            "department": "finance",
            "title": "Laptops for new hires",
            "description": "Six laptops with 32 GB RAM for the data team starting in January.",
            "amount": Decimal("8400.00"),
            "currency": "EUR",
            "vendor": "Northwind Traders",
            "priority": "NORMAL",
            "submitted_at": dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        }
        for n in range(args.events + args.warmup)
    ]
    try:
        for payload in payloads[: args.warmup]:
            publisher.publish(topic, EVENT, payload, workflow_id=str(payload["request_id"]))
        started, wall = time.process_time(), time.perf_counter()
        for payload in payloads[args.warmup :]:
            publisher.publish(topic, EVENT, payload, workflow_id=str(payload["request_id"]))
        publish_s = time.process_time() - started
        publish_wall_s = time.perf_counter() - wall
    finally:
        publisher.close()
    codec = EventCodec(
        catalog=catalog,
        registry=SchemaRegistry(settings),
        personal=personal_data(settings, reveal=True),
    )
    values = read_all(settings, topic)
    for value in values[: args.warmup]:
        codec.decode(value)
    started = time.process_time()
    for value in values[args.warmup :]:
        decoded = codec.decode(value)
        assert "@" in decoded.payload["requester"]
    read_s = time.process_time() - started
    if codec.personal is not None:
        codec.personal.close()
    admin.delete_topics([topic])
    return {
        "publish_us": publish_s / args.events * 1e6,
        "publish_wall_us": publish_wall_s / args.events * 1e6,
        "read_us": read_s / args.events * 1e6,
        "bytes": sum(len(v) for v in values) / len(values),
    }


def read_all(settings: ClientSettings, topic: str) -> list[bytes]:
    consumer = Consumer(
        settings.kafka_config(
            **{"group.id": f"bench-{uuid.uuid4().hex}", "enable.partition.eof": True}
        )
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    values: list[bytes] = []
    ends = 0
    try:
        while ends < 3:
            message = consumer.poll(5)
            if message is None:
                raise SystemExit(f"{topic}: no record or end within 5 s")
            if message.error():
                ends += 1
                continue
            values.append(message.value() or b"")
    finally:
        consumer.close()
    return values


if __name__ == "__main__":
    main()
