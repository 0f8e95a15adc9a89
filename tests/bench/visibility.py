"""How soon a read_committed consumer sees a record, by how it was written.

A workflow topic carries both kinds: agents write in transactions, while a user's
start event (``EventPublisher``, the benchmark's load generator) is written plainly.
The saga benchmark found the hop from the generator's records slow in its tail (p99
~240 ms at every load, every other hop ~60 ms). This reproduces it without sagalog:
``--writers`` transactional producers keep transactions going on one partition (one
record each, ``--pause-ms`` apart) while a plain idempotent producer writes a record
every 20 ms, and a read_committed consumer records, for each record, the time from
its CreateTime until it was delivered.

``python -m tests.bench.visibility [--seconds 25]`` prints p50/p99/p99.9/max for
both kinds; the local stack must be up (``sagalog dev up``) and warm: a broker in its
first minute gives both kinds a tail. Measured on two cores, Kafka 4.4, three runs:
transactional p99 12-13 ms, max 29-35 ms; plain p99 260-270 ms, max ~510 ms
(librdkafka's ``fetch.error.backoff.ms`` is not the cause: 10 ms changes nothing).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.settings import ClientSettings

from .harness import LatencyRecorder, print_table


def measure(
    kafka_config: dict[str, Any], *, seconds: float, writers: int, pause_ms: float
) -> dict[str, dict[str, float | int]]:
    topic = f"bench-visibility-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(kafka_config)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    stop = time.monotonic() + seconds
    recorders = {"transactional": LatencyRecorder(), "plain": LatencyRecorder()}
    failures: list[BaseException] = []

    def transactional(n: int) -> None:
        producer = Producer(
            {
                **kafka_config,
                "transactional.id": f"{topic}-{n}",
                "linger.ms": 1,
                "retry.backoff.ms": 5,
            }
        )
        producer.init_transactions(30)
        while time.monotonic() < stop:
            producer.begin_transaction()
            producer.produce(topic, b"transactional")
            producer.commit_transaction(30)
            time.sleep(pause_ms / 1000)

    def plain() -> None:
        producer = Producer({**kafka_config, "linger.ms": 1, "enable.idempotence": True})
        while time.monotonic() < stop:
            producer.produce(topic, b"plain")
            producer.poll(0)
            time.sleep(0.02)
        producer.flush(30)

    def read() -> None:
        consumer = Consumer(
            {
                **kafka_config,
                "group.id": topic,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 20,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        while time.monotonic() < stop + 3:
            message = consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            waited_ns = time.time_ns() - message.timestamp()[1] * 1_000_000
            recorders[message.value().decode()].record(waited_ns)
        consumer.close()

    def guarded(target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # reported after the join
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(transactional, n)) for n in range(writers)]
    threads += [threading.Thread(target=guarded, args=(plain,))]
    threads += [threading.Thread(target=guarded, args=(read,))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        admin.delete_topics([topic])
    if failures:
        raise failures[0]
    figures: dict[str, dict[str, float | int]] = {}
    for kind, recorder in recorders.items():
        summary = recorder.summary()
        figures[kind] = {
            "count": summary.count,
            "p50_ms": summary.p50_ms,
            "p99_ms": summary.p99_ms,
            "p999_ms": summary.p999_ms,
            "max_ms": summary.max_ms,
        }
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.visibility", description=__doc__)
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--writers", type=int, default=3, help="transactional producers")
    parser.add_argument("--pause-ms", type=float, default=10.0, help="between transactions")
    args = parser.parse_args(argv)
    figures = measure(
        ClientSettings().kafka_config(),
        seconds=args.seconds,
        writers=args.writers,
        pause_ms=args.pause_ms,
    )
    print_table(
        "read_committed delivery after CreateTime, one partition with transactions going on",
        [
            (
                f"{kind} records",
                f"n={f['count']:,}  p50 {f['p50_ms']:.1f}  p99 {f['p99_ms']:.1f}  "
                f"p99.9 {f['p999_ms']:.1f}  max {f['max_ms']:.1f} ms",
            )
            for kind, f in figures.items()
        ],
    )
    print(json.dumps({"visibility": figures}))


if __name__ == "__main__":
    main()
