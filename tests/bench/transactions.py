"""What one Kafka transaction costs: the client's CPU and the broker's, by its size.

Every agent hand-off is a consume → produce → ``send_offsets_to_transaction`` →
commit transaction, and on a co-located broker the broker's share of that work comes
out of the same cores as everything else. This relays ``--records`` records through
one transactional consumer/producer pair, ``size`` records per transaction, and
divides the client process's CPU time (librdkafka's threads included) and the
broker's (``/proc/<pid>/stat`` of the local stack's JVM) by the transactions made.
The topics are throwaway and deleted at the end.

``python -m tests.bench.transactions [--sizes 1,10,50] [--records 1000]`` prints a
table and the figures as JSON; the local stack must be up (``sagalog dev up``).
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.settings import ClientSettings

from .harness import print_figures, producer_config
from .sagas import stack_pids
from .tracker import cpu_seconds

WARM_UP_SIZE = 10  # records per transaction of the uncounted first round


def measure(kafka_config: dict[str, Any], *, sizes: list[int], records: int) -> dict[str, Any]:
    broker = stack_pids().get("kafka")
    if broker is None:
        raise SystemExit("no local broker to measure: start it with `sagalog dev up`")
    suffix = uuid.uuid4().hex[:8]
    source, sink = f"bench-txn-in-{suffix}", f"bench-txn-out-{suffix}"
    admin = AdminClient(kafka_config)
    for future in admin.create_topics([NewTopic(source, 3, 1), NewTopic(sink, 3, 1)]).values():
        future.result()
    try:
        seed = Producer(producer_config(kafka_config))
        for i in range(records * (len(sizes) + 1)):
            seed.produce(source, key=str(i).encode(), value=b"x" * 300)
        seed.flush(30)
        consumer = Consumer(
            {
                **kafka_config,
                "group.id": f"bench-txn-{suffix}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        consumer.subscribe([source])
        producer = Producer(
            producer_config(
                kafka_config,
                **{
                    "transactional.id": f"bench-txn-{suffix}",
                    "linger.ms": 1,
                    "retry.backoff.ms": 5,
                },
            )
        )
        producer.init_transactions(30)
        figures = {}
        for round_no, size in enumerate([WARM_UP_SIZE, *sizes]):
            relayed = transactions = 0
            broker_before, client_before = cpu_seconds(broker), time.process_time()
            started = time.monotonic()
            while relayed < records:
                batch = consumer.consume(size, 10)
                if not batch:
                    break
                producer.begin_transaction()
                for message in batch:
                    producer.produce(sink, key=message.key(), value=message.value())
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()),
                    consumer.consumer_group_metadata(),
                    30,
                )
                producer.commit_transaction(30)
                relayed += len(batch)
                transactions += 1
            elapsed = time.monotonic() - started
            per = max(1, transactions)
            if round_no == 0:
                continue  # a fresh broker's JIT and coordinators: not counted
            figures[str(size)] = {
                "transactions": transactions,
                "wall_ms": round(elapsed / per * 1000, 2),
                "client_cpu_ms": round((time.process_time() - client_before) / per * 1000, 2),
                "broker_cpu_ms": round((cpu_seconds(broker) - broker_before) / per * 1000, 2),
            }
        consumer.close()
        return figures
    finally:
        admin.delete_topics([source, sink])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.transactions", description=__doc__)
    parser.add_argument("--sizes", default="1,10,50", help="records per transaction")
    parser.add_argument("--records", type=int, default=1000, help="records per size")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    figures = measure(ClientSettings().kafka_config(), sizes=sizes, records=args.records)
    print_figures(
        "one transaction: consume, produce, send offsets, commit",
        "transaction_cost",
        figures,
        lambda size, f: (
            f"{size} record(s) each",
            f"{f['transactions']} transactions, {f['wall_ms']} ms wall, client CPU "
            f"{f['client_cpu_ms']} ms, broker CPU {f['broker_cpu_ms']} ms per transaction",
        ),
    )


if __name__ == "__main__":
    main()
