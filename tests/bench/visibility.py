"""How soon a read_committed consumer sees a record, by how it was written.

A workflow topic carries both kinds: agents write in transactions, while a user's
start event (``EventPublisher``, the benchmark's load generator) is written plainly.
``--writers`` transactional producers keep transactions going on one partition (one
record each, ``--pause-ms`` apart) while a plain idempotent producer, warmed up
first, writes a record every 20 ms, and a read_committed consumer records, for each
record, the time from its CreateTime until it was delivered. Apart, the first record
of a newly made producer, idempotent or not, from ``produce`` to its delivery.

``python -m tests.bench.visibility [--seconds 25]`` prints p50/p99/p99.9/max; the
local stack must be up (``sagalog dev up``) and warm: a broker in its first minute
gives both kinds a tail. Measured on two cores, Kafka 4.4, librdkafka 2.16: both
kinds p99 ~5-13 ms, max ~13-40 ms; a new idempotent producer's first record 502 ms
every time, a plain one's 50-100 ms (connection and metadata). librdkafka asks for
the idempotent producer id before any broker connection is up and, the producer not
being transactional, tries again on a fixed 500 ms timer; the saga benchmark's
generator, made afresh for every probe, put that on its first hop's p99 (~240 ms at
every load) until it was kept for the whole run. A service that publishes start
events keeps one publisher.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.settings import ClientSettings

from .harness import LatencyRecorder, print_figures, producer_config


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
            producer_config(
                kafka_config,
                **{"transactional.id": f"{topic}-{n}", "linger.ms": 1, "retry.backoff.ms": 5},
            )
        )
        producer.init_transactions(30)
        while time.monotonic() < stop:
            producer.begin_transaction()
            producer.produce(topic, b"transactional")
            producer.commit_transaction(30)
            time.sleep(pause_ms / 1000)

    plain_producer = Producer(producer_config(kafka_config, **{"linger.ms": 1}))
    plain_producer.produce(topic, b"warm-up")
    plain_producer.flush(30)

    def plain() -> None:
        producer = plain_producer
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
            kind = (message.value() or b"").decode()
            if kind in recorders:
                recorders[kind].record(time.time_ns() - message.timestamp()[1] * 1_000_000)
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
        if not failures:
            for idempotent in (True, False):
                kind = "new idempotent producer's first" if idempotent else "new producer's first"
                recorders[kind] = first_delivery(kafka_config, topic, idempotent=idempotent)
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


def first_delivery(
    kafka_config: dict[str, Any], topic: str, *, idempotent: bool, rounds: int = 5
) -> LatencyRecorder:
    """From ``produce`` to the delivery report of a new producer's first record."""
    recorder = LatencyRecorder()
    for _ in range(rounds):
        producer = Producer(
            producer_config(kafka_config, **{"linger.ms": 1, "enable.idempotence": idempotent})
        )
        started = time.perf_counter_ns()
        producer.produce(
            topic,
            b"first",
            on_delivery=lambda _error, _message, t=started: recorder.record(
                time.perf_counter_ns() - t
            ),
        )
        producer.flush(30)
    return recorder


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
    print_figures(
        "read_committed delivery after CreateTime, one partition with transactions going on",
        "visibility",
        figures,
        lambda kind, f: (
            f"{kind} records",
            f"n={f['count']:,}  p50 {f['p50_ms']:.1f}  p99 {f['p99_ms']:.1f}  "
            f"p99.9 {f['p999_ms']:.1f}  max {f['max_ms']:.1f} ms",
        ),
    )


if __name__ == "__main__":
    main()
