"""A librdkafka consumer's lag per partition, read from its own statistics.

librdkafka computes each assigned partition's lag itself (the high watermark, or
under ``read_committed`` the last stable offset, minus the consumer's position) and
hands it over as JSON every ``statistics.interval.ms``. Reading that costs one parse
every few seconds; asking the broker for watermarks per scrape would cost requests.
The same statistics carry each partition's last stable offset and high watermark
apart, which tells a partition held open by a transaction (``held_open``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

STATS_INTERVAL_MS = 5000
"""How often librdkafka reports (``statistics.interval.ms``): a third of a scrape."""

Lag = dict[tuple[str, int], int]
Spans = dict[tuple[str, int], tuple[int, int]]
"""``(last stable offset, high watermark)`` per partition."""


def consumer_lag(stats_json: str) -> Lag:
    """Each partition the consumer was assigned, and its lag in records.

    Partitions librdkafka knows but the application was not given (``desired`` false),
    its internal partition -1, and a lag it cannot tell yet (-1) are left out.
    """
    lag: Lag = {}
    for place, partition in _assigned(stats_json):
        value = partition.get("consumer_lag", -1)
        if value >= 0:
            lag[place] = int(value)
    return lag


def held_open(stats_json: str) -> Spans:
    """The assigned partitions whose last stable offset lies below their high watermark:
    a transaction is open there, and a ``read_committed`` reader waits at it
    (``sagalog.open_transactions``)."""
    spans: Spans = {}
    for place, partition in _assigned(stats_json):
        stable, end = partition.get("ls_offset", -1), partition.get("hi_offset", -1)
        if 0 <= stable < end:
            spans[place] = (int(stable), int(end))
    return spans


def _assigned(stats_json: str) -> Iterator[tuple[tuple[str, int], dict[str, Any]]]:
    stats: dict[str, Any] = json.loads(stats_json)
    for topic, entry in (stats.get("topics") or {}).items():
        for key, partition in (entry.get("partitions") or {}).items():
            if key != "-1" and partition.get("desired"):
                yield (topic, int(key)), partition
