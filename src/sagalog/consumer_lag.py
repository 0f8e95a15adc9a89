"""A librdkafka consumer's lag per partition, read from its own statistics.

librdkafka computes each assigned partition's lag itself (the high watermark, or
under ``read_committed`` the last stable offset, minus the consumer's position) and
hands it over as JSON every ``statistics.interval.ms``. Reading that costs one parse
every few seconds; asking the broker for watermarks per scrape would cost requests.
"""

from __future__ import annotations

import json
from typing import Any

STATS_INTERVAL_MS = 5000
"""How often librdkafka reports (``statistics.interval.ms``): a third of a scrape."""

Lag = dict[tuple[str, int], int]


def consumer_lag(stats_json: str) -> Lag:
    """Each partition the consumer was assigned, and its lag in records.

    Partitions librdkafka knows but the application was not given (``desired`` false),
    its internal partition -1, and a lag it cannot tell yet (-1) are left out.
    """
    stats: dict[str, Any] = json.loads(stats_json)
    lag: Lag = {}
    for topic, entry in (stats.get("topics") or {}).items():
        for key, partition in (entry.get("partitions") or {}).items():
            value = partition.get("consumer_lag", -1)
            if key == "-1" or not partition.get("desired") or value < 0:
                continue
            lag[(topic, int(key))] = int(value)
    return lag
