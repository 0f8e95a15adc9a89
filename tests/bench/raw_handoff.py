"""The physical limit: a plain transactional confluent-kafka relay, no sagalog code.

It does what an agent does around its handler, and nothing else: read_committed
consume, produce, ``send_offsets_to_transaction`` and commit, in transactions of up to
``max_batch`` records or ``max_txn_ms``, whichever comes first. Whatever sagalog adds on
top of this loop is the cost ``handoff_ratio`` shows.

One setting matters more than all the others: ``retry.backoff.ms``. Right after a
commit the coordinator is still writing the transaction markers, so the next
transaction's ``AddOffsetsToTxn`` is answered CONCURRENT_TRANSACTIONS and librdkafka
retries after ``retry.backoff.ms`` (100 ms by default; the Java client uses 20 ms for
this case). With the default, every transaction costs at least ~50-100 ms and the relay
tops out near 6,000 events/s here; at 5 ms it moves several times more
(confluent-kafka-python issue 967). A baseline must be the best plain loop, so it is set.

Run as its own process by ``start_raw_relay`` (``python -m tests.bench.raw_handoff``);
the measurement lives in ``handoff.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from array import array
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .handoff import RelayJob, StartRelay
from .harness import producer_config, sent_ns_of, take_available, write_pickups

REPO = Path(__file__).resolve().parents[2]
CONFIG_ENV = "BENCH_KAFKA_CONFIG"
"""The librdkafka settings, as JSON in the environment rather than on a visible command line."""


class RawRelay:
    """consume → produce → send offsets → commit, batched, recording each pickup time."""

    def __init__(
        self,
        kafka_config: Mapping[str, Any],
        job: RelayJob,
        *,
        max_batch: int = 500,
        max_txn_ms: float = 100,
        retry_backoff_ms: int = 5,
    ) -> None:
        self.job = job
        self.max_batch = max_batch
        self.max_txn_s = max_txn_ms / 1000
        self.sent_ns = array("q")  # arrays, not tuples: a million of them must not slow GC
        self.picked_ns = array("q")
        self._stopping = False
        self._open = 0  # records in the open transaction; 0 means none is open
        self._opened_at = 0.0
        self.consumer = Consumer(
            {
                **kafka_config,
                "group.id": job.group_id,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.producer = Producer(
            producer_config(
                kafka_config,
                **{"transactional.id": job.transactional_id, "retry.backoff.ms": retry_backoff_ms},
            )
        )

    def stop(self) -> None:
        self._stopping = True

    def run(self) -> None:
        self.producer.init_transactions(30)
        self.consumer.subscribe([self.job.in_topic], on_revoke=self._on_revoke)
        try:
            while not self._stopping:
                wait = 0.1
                if self._open:
                    wait = max(0.0, self._opened_at + self.max_txn_s - time.perf_counter())
                batch = take_available(
                    self.consumer, max_messages=self.max_batch - self._open, wait_s=wait
                )
                for message in batch:
                    sent = sent_ns_of(message)  # handler start: the loop holds the record
                    if sent is not None:
                        self.picked_ns.append(time.time_ns())
                        self.sent_ns.append(sent)
                    if not self._open:
                        self.producer.begin_transaction()
                        self._opened_at = time.perf_counter()
                    self.producer.produce(
                        self.job.out_topic,
                        message.value(),
                        message.key(),
                        headers=message.headers(),
                    )
                    self._open += 1
                self.producer.poll(0)
                if self._open and (
                    self._open >= self.max_batch
                    or time.perf_counter() - self._opened_at >= self.max_txn_s
                ):
                    self._commit()
            self._commit()
        finally:
            self.consumer.close()
        write_pickups(self.job.result_path, zip(self.sent_ns, self.picked_ns, strict=True))

    def _on_revoke(self, _consumer: Consumer, _partitions: list[TopicPartition]) -> None:
        self._commit()  # offsets of partitions about to leave must go with their records

    def _commit(self) -> None:
        """Commit the open transaction, if any; a non-retriable error ends the benchmark."""
        if not self._open:
            return
        self.producer.send_offsets_to_transaction(
            self.consumer.position(self.consumer.assignment()),
            self.consumer.consumer_group_metadata(),
            30,
        )
        while True:
            try:
                self.producer.commit_transaction(30)
                break
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise  # abort-and-rewind is the agent's job; a benchmark fails loudly
        self._open = 0


def start_raw_relay(
    kafka_config: Mapping[str, Any],
    *,
    max_batch: int = 500,
    max_txn_ms: float = 100,
    retry_backoff_ms: int = 5,
) -> StartRelay:
    """A ``start_relay`` for ``measure_handoff`` that runs ``RawRelay`` in a child process."""

    def start(job: RelayJob) -> subprocess.Popen[bytes]:
        command = [
            sys.executable,
            "-m",
            "tests.bench.raw_handoff",
            f"--in-topic={job.in_topic}",
            f"--out-topic={job.out_topic}",
            f"--group-id={job.group_id}",
            f"--transactional-id={job.transactional_id}",
            f"--result-path={job.result_path}",
            f"--max-batch={max_batch}",
            f"--max-txn-ms={max_txn_ms}",
            f"--retry-backoff-ms={retry_backoff_ms}",
        ]
        env = {**os.environ, CONFIG_ENV: json.dumps(dict(kafka_config))}
        return subprocess.Popen(command, cwd=REPO, env=env)

    return start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-topic", required=True)
    parser.add_argument("--out-topic", required=True)
    parser.add_argument("--group-id", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--result-path", type=Path, required=True)
    parser.add_argument("--max-batch", type=int, default=500)
    parser.add_argument("--max-txn-ms", type=float, default=100)
    parser.add_argument("--retry-backoff-ms", type=int, default=5)
    args = parser.parse_args(argv)
    job = RelayJob(
        in_topic=args.in_topic,
        out_topic=args.out_topic,
        group_id=args.group_id,
        transactional_id=args.transactional_id,
        result_path=args.result_path,
    )
    config = json.loads(os.environ.get(CONFIG_ENV, '{"bootstrap.servers": "127.0.0.1:9092"}'))
    relay = RawRelay(
        config,
        job,
        max_batch=args.max_batch,
        max_txn_ms=args.max_txn_ms,
        retry_backoff_ms=args.retry_backoff_ms,
    )

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        relay.stop()

    signal.signal(signal.SIGTERM, on_term)
    relay.run()


if __name__ == "__main__":
    main()
