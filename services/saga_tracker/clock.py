"""The tracker's clock: the machine's, or a virtual one that moves only when told.

Every decision takes ``now_ms`` from here, so time is injected, never read behind
the rules' back. With ``clock=virtual`` time is the largest tick seen on the clock
topic: a test (or ``sagalog tracker advance``) publishes "it is now T" and the
tracker fires every timer due by T, so a three-day approval passes in seconds on the
real broker. A restarted virtual tracker takes the time of the last ticks in the
topic, so its clock never goes back.
"""

from __future__ import annotations

import time
from typing import Literal

from confluent_kafka import Consumer, TopicPartition

from sagalog.settings import ClientSettings


class TrackerClock:
    def __init__(self, mode: Literal["wall", "virtual"], *, start_ms: int = 0) -> None:
        self.mode = mode
        self._virtual = start_ms

    @property
    def virtual(self) -> bool:
        return self.mode == "virtual"

    def now_ms(self) -> int:
        return self._virtual if self.virtual else time.time_ns() // 1_000_000

    def observe(self, tick_ms: int) -> int:
        """A tick arrived; the time to fire timers at."""
        if self.virtual:
            self._virtual = max(self._virtual, tick_ms)
        return self.now_ms()


def parse_tick(value: bytes | None) -> int | None:
    """A tick's time (epoch ms, ASCII digits); None when it is not a tick."""
    if not value or not value.isdigit():
        return None
    return int(value)


def last_tick_ms(settings: ClientSettings, topic: str, partitions: int) -> int:
    """The largest tick among the last record of each partition of the clock topic (0: none)."""
    consumer = Consumer(
        settings.kafka_config(**{"group.id": "sagalog-clock-reader", "enable.auto.commit": False})
    )
    try:
        latest = 0
        for partition in range(partitions):
            tp = TopicPartition(topic, partition)
            low, high = consumer.get_watermark_offsets(tp, timeout=settings.connect_timeout_s)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, high - 1)])
            message = consumer.poll(settings.connect_timeout_s)
            if message is not None and message.error() is None:
                latest = max(latest, parse_tick(message.value()) or 0)
        return latest
    finally:
        consumer.close()
