"""Replay speed: decoded events per second from one process, against the plain consume rate.

``measure_replay`` preloads a throwaway topic with N realistic ``StateTransition``
events (procurement workflows as the tracker would publish them: registry-encoded,
lz4-compressed, CloudEvents headers, keyed by workflow id), then reads the whole
topic, in alternating rounds, with

- a plain confluent-kafka loop that only touches each record's value
  (``raw_consume_events_per_s``: the physical limit of one Python process here), and
- ``sagalog.replay.TopicReplay`` decoding every record as ``EventCodec.decode`` would
  (``replay_events_per_s``), and again leaving timestamps as epoch ms, the way
  ``sagalog analytics`` reads (``replay_epoch_ms_events_per_s``).

Figures are medians over the rounds. The CPU time the reading thread spent per
event (``..._cpu_us_per_event``) is given too: on a shared machine it moves far less
than the rates do. The topic and its registry subject are deleted at the end.
``python -m tests.bench.replay`` prints the dict.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient

from sagalog.cluster import connect_admin
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.subjects import subject_for
from sagalog.replay import TopicReplay, replay_consumer_config
from sagalog.settings import ClientSettings

REPO = Path(__file__).resolve().parents[2]
TRANSITION = "sagalog.v1.StateTransition"

_FORWARD = (
    ("classify_request", 20_000),
    ("retrieve_policies", 45_000),
    ("score_risk", 60_000),
    ("reserve_budget", 30_000),
)
_AFTER_GATE = (("create_purchase_order", 90_000), ("notify_vendor", 40_000))


def procurement_histories(
    count: int, *, end_ms: int, span_ms: int = 2 * 86_400_000, seed: int = 11
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``count`` transitions of procurement workflows (workflow id, transitions in order).

    Most complete; some are rejected at the gate and compensated, some fail at risk
    scoring, some time out waiting for a manager. Step times are lognormal around
    realistic medians; starts spread over ``span_ms`` before ``end_ms``.
    """
    rng = random.Random(seed)

    def took(median_ms: int, spread: float = 0.6) -> int:
        return int(median_ms * rng.lognormvariate(0, spread))

    made = 0
    while made < count:
        workflow = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        # The spans the workflow goes through: (state, step, time spent in it).
        outcome = rng.random()
        forward = _FORWARD[:3] if outcome < 0.05 else _FORWARD
        spans: list[tuple[str, str | None, int]] = [
            ("running", step, took(median)) for step, median in forward
        ]
        if outcome < 0.05:
            spans.append(("failed", None, 0))  # the risk model kept failing
        else:
            wait = took(4 * 3_600_000, 0.8)
            if outcome < 0.13:  # rejected: release the budget
                spans += [("pending_approval", "manager_approval", wait)]
                spans += [("compensating", "reserve_budget", took(20_000, 0.4))]
                spans += [("compensated", None, 0)]
            elif outcome < 0.16:  # nobody decided within the gate's deadline
                spans += [("pending_approval", "manager_approval", 72 * 3_600_000)]
                spans += [("compensating", "reserve_budget", took(20_000, 0.4))]
                spans += [("timed_out", None, 0)]
            else:
                spans += [("pending_approval", "manager_approval", wait)]
                spans += [("approved", "manager_approval", 0)]
                spans += [("running", step, took(median)) for step, median in _AFTER_GATE]
                spans += [("completed", None, 0)]
        now = end_ms - span_ms + rng.randrange(span_ms)
        history = []
        state, step, spent = "initiated", None, 0
        for to_state, to_step, dwell in spans:
            now += spent
            history.append(
                {
                    "flow": "procurement",
                    "flow_version": 1,
                    "from_state": state,
                    "to_state": to_state,
                    "step": to_step,
                    "cause_event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    "time_in_previous_state_ms": spent,
                    "at": dt.datetime.fromtimestamp(now / 1000, dt.UTC),
                    "from_step": step,
                }
            )
            state, step, spent = to_state, to_step, dwell
        history = history[: count - made]
        made += len(history)
        yield workflow, history


def preload(settings: ClientSettings, codec: EventCodec, topic: str, events: int) -> None:
    """``events`` transitions on ``topic``, as the tracker's producer sends them."""
    producer = Producer(
        settings.producer_config(
            **{
                "linger.ms": 20,
                "batch.size": 1_000_000,
                "compression.type": "lz4",
                "queue.buffering.max.messages": 1_000_000,
                "enable.idempotence": True,
            }
        )
    )
    # Every timestamp in the past: the broker refuses records too far in the future
    # (log.message.timestamp.after.max.ms), and a workflow may run for three days.
    end_ms = int(time.time() * 1000) - 4 * 86_400_000
    refused: list[str] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            refused.append(error.str())

    for workflow, history in procurement_histories(events, end_ms=end_ms):
        for datum in history:
            at = datum["at"]
            headers = EventHeaders(
                id=str(uuid.uuid4()),
                type=TRANSITION,
                source="sagalog/saga-tracker",
                workflow_id=workflow,
                time=at,
                causation_id=datum["cause_event_id"],
                flow_version=1,
                priority="NORMAL",
            )
            value = codec.encode(topic, TRANSITION, datum)
            while True:
                try:
                    producer.produce(
                        topic,
                        key=workflow.encode(),
                        value=value,
                        headers=headers.to_kafka(),
                        timestamp=int(at.timestamp() * 1000),
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    producer.poll(0.2)
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"preloading {topic}: records still unacknowledged after 120 s")
    if refused:
        raise RuntimeError(f"preloading {topic}: {len(refused)} records refused: {refused[0]}")


def raw_consume(
    settings: ClientSettings, topic: str, *, batch_size: int
) -> tuple[int, float, float]:
    """Every record of ``topic`` through a plain loop touching each value.

    Returns (records, seconds, CPU seconds of this thread).
    """
    consumer = Consumer(replay_consumer_config(settings))
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = set(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in sorted(partitions)])
        count = 0
        started, cpu = time.perf_counter(), time.thread_time()
        while partitions:
            for message in consumer.consume(batch_size, 0.5):
                error = message.error()
                if error is None:
                    message.value()
                    count += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    partitions.discard(message.partition())
        return count, time.perf_counter() - started, time.thread_time() - cpu
    finally:
        consumer.close()


def replay_round(
    settings: ClientSettings, codec: EventCodec, topic: str, *, batch_size: int, logical: bool
) -> tuple[int, float, float]:
    """Every record of ``topic`` decoded by ``TopicReplay``.

    Returns (decoded, seconds, CPU seconds of this thread).
    """
    with TopicReplay(
        settings,
        codec,
        topic,
        batch_size=batch_size,
        logical_types=logical,
        keys=True,
    ) as replay:
        started, cpu = time.perf_counter(), time.thread_time()
        decoded = sum(len(batch.payloads) for batch in replay.batches())
        elapsed, cpu = time.perf_counter() - started, time.thread_time() - cpu
        assert replay.stats.undecodable == 0, replay.stats.examples[:3]
    return decoded, elapsed, cpu


def measure_replay(
    settings: ClientSettings | None = None,
    *,
    events: int = 500_000,
    rounds: int = 3,
    batch_size: int = 10_000,
    partitions: int = 6,
) -> dict[str, Any]:
    """Preload a throwaway topic, measure decoded and raw reading of it, delete it."""
    settings = settings or ClientSettings()
    catalog = SchemaCatalog.load(REPO / "schemas")
    registry = SchemaRegistry(settings)
    codec = EventCodec(catalog=catalog, registry=registry)
    suffix = uuid.uuid4().hex[:10]
    topic = f"bench.replay.transitions.{suffix}"
    admin, _ = connect_admin(settings)
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, config={"retention.ms": "-1"})]
    ).values():
        future.result(timeout=30)
    subject = subject_for(topic, TRANSITION)
    try:
        registry.register(subject, catalog[TRANSITION])
        started = time.perf_counter()
        preload(settings, codec, topic, events)
        preload_s = time.perf_counter() - started
        raw_rates, replay_rates, plain_rates = [], [], []
        raw_cpu, replay_cpu = [], []
        for _ in range(rounds):
            count, seconds, cpu = raw_consume(settings, topic, batch_size=batch_size)
            assert count == events, f"raw read {count} of {events}"
            raw_rates.append(count / seconds)
            raw_cpu.append(cpu / count * 1e6)
            count, seconds, cpu = replay_round(
                settings, codec, topic, batch_size=batch_size, logical=True
            )
            assert count == events, f"replay decoded {count} of {events}"
            replay_rates.append(count / seconds)
            replay_cpu.append(cpu / count * 1e6)
            count, seconds, _ = replay_round(
                settings, codec, topic, batch_size=batch_size, logical=False
            )
            plain_rates.append(count / seconds)
    finally:
        for future in admin.delete_topics([topic], request_timeout=30).values():
            future.result(timeout=30)
        client = SchemaRegistryClient(settings.registry_config())
        if subject in client.get_subjects():
            client.delete_subject(subject)
            client.delete_subject(subject, permanent=True)
    replay, raw = statistics.median(replay_rates), statistics.median(raw_rates)
    return {
        "replay_events_per_s": round(replay, 1),
        "raw_consume_events_per_s": round(raw, 1),
        "replay_to_raw_ratio": round(replay / raw, 3),
        "replay_epoch_ms_events_per_s": round(statistics.median(plain_rates), 1),
        "replay_rounds_per_s": [round(r, 1) for r in replay_rates],
        "raw_consume_rounds_per_s": [round(r, 1) for r in raw_rates],
        "replay_epoch_ms_rounds_per_s": [round(r, 1) for r in plain_rates],
        "replay_cpu_us_per_event": round(statistics.median(replay_cpu), 2),
        "raw_consume_cpu_us_per_event": round(statistics.median(raw_cpu), 2),
        "replay_events": events,
        "replay_batch_size": batch_size,
        "replay_partitions": partitions,
        "replay_preload_s": round(preload_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    result = measure_replay(
        events=args.events,
        rounds=args.rounds,
        batch_size=args.batch_size,
        partitions=args.partitions,
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
