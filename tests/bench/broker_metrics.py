"""What the broker did for a run: requests by type and records in, from its own counters.

Each dev-stack node serves its JMX metrics to Prometheus (the JMX exporter agent,
``deploy/local/kafka-metrics.yaml``); a benchmark reads them before and after a run
and divides by the sagas the run completed. These are the broker's counts, so they
include every client on it: the load generator, the bench's own readers and, on a
shared stack, anything else running then.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from sagalog.devstack.nodes import kafka_nodes
from sagalog.devstack.settings import DevStackSettings
from sagalog.devstack.shape import read_shape

REQUESTS = "kafka_network_requests"
RECORDS_IN = "kafka_server_messagesin"
BYTES_IN = "kafka_server_bytesin"

#: Kafka counts every Fetch twice: as ``Fetch`` and again as who sent it
#: (``RequestChannel.updateRequestMetrics``); a verify-only AddPartitionsToTxn (a
#: broker asking the coordinator, KIP-890) is counted once, as its own name.
FETCH_SUBCOUNTS = frozenset({"FetchConsumer", "FetchFollower"})


@dataclass(frozen=True)
class BrokerCounts:
    """Counters summed over the nodes: requests by API, records and bytes in by topic."""

    requests: Counter[str] = field(default_factory=Counter)
    records_in: Counter[str] = field(default_factory=Counter)
    bytes_in: Counter[str] = field(default_factory=Counter)

    def __sub__(self, earlier: BrokerCounts) -> BrokerCounts:
        return BrokerCounts(
            requests=self.requests - earlier.requests,
            records_in=self.records_in - earlier.records_in,
            bytes_in=self.bytes_in - earlier.bytes_in,
        )

    def per(self, sagas: int) -> dict[str, Any]:
        """Each figure divided by ``sagas``: what one saga cost the broker."""
        n = max(1, sagas)
        return {
            "requests_per_saga": round(sum(self.requests.values()) / n, 2),
            "requests_per_saga_by_api": {
                api: round(count / n, 2) for api, count in self.requests.most_common()
            },
            "records_in_per_saga": round(sum(self.records_in.values()) / n, 2),
            "records_in_per_saga_by_topic": {
                topic: round(count / n, 2) for topic, count in self.records_in.most_common()
            },
            "bytes_in_per_saga": round(sum(self.bytes_in.values()) / n),
        }


def metrics_urls(settings: DevStackSettings | None = None) -> list[str]:
    """The ``/metrics`` of every node of the local stack; empty when it serves none."""
    settings = settings or DevStackSettings()
    shape = read_shape(settings.state_dir)
    if shape is None:
        return []
    return [
        f"http://127.0.0.1:{node.metrics_port}/metrics"
        for node in kafka_nodes(settings, shape)
        if node.metrics_port
    ]


def parse(text: str) -> BrokerCounts:
    """The counters of one node's exposition text."""
    counts = BrokerCounts()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            if family.name == REQUESTS and sample.labels["request"] not in FETCH_SUBCOUNTS:
                counts.requests[sample.labels["request"]] += int(sample.value)
            elif family.name == RECORDS_IN and "topic" in sample.labels:
                counts.records_in[sample.labels["topic"]] += int(sample.value)
            elif family.name == BYTES_IN and "topic" in sample.labels:
                counts.bytes_in[sample.labels["topic"]] += int(sample.value)
    return counts


def scrape(urls: list[str]) -> BrokerCounts | None:
    """The nodes' counters summed; None when a node does not answer (a stack started
    before the nodes served metrics: ``sagalog dev down`` and ``up`` again)."""
    if not urls:
        return None
    total = BrokerCounts()
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                counts = parse(answer.read().decode("utf-8"))
        except (OSError, urllib.error.URLError):
            return None
        total.requests.update(counts.requests)
        total.records_in.update(counts.records_in)
        total.bytes_in.update(counts.bytes_in)
    return total
