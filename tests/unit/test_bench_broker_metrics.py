"""Reading the broker's counters as the JMX exporter serves them (``bench.broker_metrics``)."""

from __future__ import annotations

from collections import Counter

from .bench_modules import load_bench_module

_bench = load_bench_module("broker_metrics")
BrokerCounts = _bench.BrokerCounts  # type: ignore[attr-defined]
parse = _bench.parse  # type: ignore[attr-defined]

#: Lines as a dev-stack node served them (kafka-metrics.yaml, exporter 1.0.1).
EXPOSITION = """\
# HELP kafka_network_requests_total Attribute exposed for management
# TYPE kafka_network_requests_total counter
kafka_network_requests_total{request="Produce",version="11"} 40.0
kafka_network_requests_total{request="Produce",version="12"} 2.0
kafka_network_requests_total{request="Fetch",version="17"} 100.0
kafka_network_requests_total{request="FetchConsumer",version="17"} 100.0
kafka_network_requests_total{request="EndTxn",version="5"} 8.0
# TYPE kafka_server_messagesin_total counter
kafka_server_messagesin_total 60.0
kafka_server_messagesin_total{topic="orders.events"} 50.0
kafka_server_messagesin_total{topic="sagalog.transitions"} 10.0
# TYPE kafka_server_bytesin_total counter
kafka_server_bytesin_total 6000.0
kafka_server_bytesin_total{topic="orders.events"} 6000.0
# TYPE kafka_server_request_handler_idle_ratio gauge
kafka_server_request_handler_idle_ratio 0.93
"""


def test_requests_are_counted_by_api_over_every_version_and_a_fetch_once() -> None:
    counts = parse(EXPOSITION)
    assert counts.requests == {"Produce": 42, "Fetch": 100, "EndTxn": 8}


def test_records_are_counted_by_topic_and_the_broker_total_is_not_counted_again() -> None:
    counts = parse(EXPOSITION)
    assert counts.records_in == {"orders.events": 50, "sagalog.transitions": 10}
    assert sum(counts.bytes_in.values()) == 6000


def test_a_run_costs_the_difference_divided_by_its_sagas() -> None:
    before = parse(EXPOSITION)
    after = BrokerCounts(
        requests=before.requests + Counter({"Produce": 20, "Fetch": 30}),
        records_in=before.records_in + Counter({"orders.events": 60}),
        bytes_in=before.bytes_in.copy(),
    )
    figures = (after - before).per(10)
    assert figures["requests_per_saga"] == 5.0
    assert figures["requests_per_saga_by_api"] == {"Fetch": 3.0, "Produce": 2.0}
    assert figures["records_in_per_saga"] == 6.0
    assert figures["bytes_in_per_saga"] == 0
