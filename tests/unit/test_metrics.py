"""Prometheus metrics (``sagalog.metrics``) and what each part exports: the families read
at scrape time, the tracker's tally of committed batches, librdkafka's lag, and the
``/metrics`` endpoints, parsed back with prometheus_client's own text parser."""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from sagalog import metrics
from sagalog.agents import exported_metrics as agent_metrics
from sagalog.agents.circuit_breaker import BreakerState
from sagalog.agents.telemetry import AgentStats
from sagalog.budgets.book import BudgetBook, Spend
from sagalog.budgets.declaration import Budget
from sagalog.budgets.estimate import Price
from sagalog.budgets.ledger import Usage
from sagalog.consumer_lag import consumer_lag, held_open
from sagalog.events import StateTransition
from sagalog.health import Verdict
from sagalog.health_server import HealthServer
from sagalog.services.tracker.exported_metrics import table_sizes
from sagalog.services.tracker.tally import Tally
from sagalog.tracker import Outcome


def _samples(text: bytes | str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    body = text.decode() if isinstance(text, bytes) else text
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == name
    }


def _transition(from_state: str, to_state: str, *, in_state_ms: int = 1500) -> StateTransition:
    return StateTransition(
        flow="procurement",
        flow_version=1,
        from_state=from_state,
        to_state=to_state,
        cause_event_id="c",
        time_in_previous_state_ms=in_state_ms,
        at=dt.datetime(2026, 12, 3, tzinfo=dt.UTC),
    )


def test_a_family_is_read_at_each_scrape_until_its_source_is_removed() -> None:
    stats = AgentStats(handled=3, dead_lettered=1, transactions=4, aborted=1)
    flow = SimpleNamespace(
        breakers={"ledger": SimpleNamespace(state=BreakerState.OPEN)},
        rate_waits={"ledger": 2},
        rate_waited_s={"ledger": 0.5},
    )
    clients = SimpleNamespace(lag={("orders.events", 1): 7})
    now_ms = 1_800_000_000_000
    claims = [
        (1, Spend("model", "k1", now_ms - 1000, Usage(90, 20), Usage(60, 15))),
        (1, Spend("model", "k2", now_ms - 500, Usage(80, 30))),
    ]
    budget = Budget.of(
        "model",
        tokens_per_minute=900,
        money_per_day="1.00",
        price=Price.per_million(input="1", output="2"),
    )
    book = BudgetBook({"model": budget}, lambda held: claims)
    book.rebalance([1], total=3)
    undo = agent_metrics.export(
        lanes=[("budget-unit", stats, flow, book)],  # type: ignore[list-item]
        host="budget-unit",
        stats=stats,
        clients=clients,  # type: ignore[arg-type]
        wall_ms=lambda: now_ms,
    )
    try:
        stats.handled += 2  # counted after the export began: read at the scrape
        text, content_type = metrics.render()
        assert content_type.startswith("text/plain")
        records = _samples(text, "sagalog_agent_records_total")
        assert records[(("agent", "budget-unit"), ("outcome", "handled"))] == 5
        assert records[(("agent", "budget-unit"), ("outcome", "dead_letter"))] == 1
        assert _samples(text, "sagalog_dead_letters_total")[(("service", "budget-unit"),)] == 1
        transactions = _samples(text, "sagalog_transactions_total")
        assert transactions[(("outcome", "aborted"), ("service", "budget-unit"))] == 1
        breaker = _samples(text, "sagalog_breaker_state")
        assert breaker[(("agent", "budget-unit"), ("dependency", "ledger"))] == 2
        lag = _samples(text, "sagalog_consumer_lag_records")
        key = (("partition", "1"), ("service", "budget-unit"), ("topic", "orders.events"))
        assert lag[key] == 7
        waited = _samples(text, "sagalog_rate_limit_wait_seconds_total")
        assert waited[(("agent", "budget-unit"), ("dependency", "ledger"))] == 0.5
        tokens = _samples(text, "sagalog_budget_tokens")
        money = _samples(text, "sagalog_budget_money_micros")
        series = (("agent", "budget-unit"), ("kind", "{}"), ("ledger", "model"))

        def of(kind: str) -> tuple[tuple[str, str], ...]:
            return tuple((k, v.format(kind)) for k, v in series)

        assert [tokens[of(k)] for k in ("settled", "reserved", "limit")] == [60, 80, 300]
        assert [money[of(k)] for k in ("settled", "reserved", "limit")] == [15, 30, 333_333]
    finally:
        undo()
    assert not _samples(metrics.render()[0], "sagalog_agent_records_total")


def test_a_failing_reader_costs_its_own_series_only() -> None:
    def broken() -> metrics.Samples:
        raise RuntimeError("the part stopped as it was read")

    undo = [
        metrics.read(metrics.ROCKSDB_SIZE, broken),
        metrics.read(metrics.ROCKSDB_SIZE, lambda: [(("unit", "records"), 42)]),
    ]
    try:
        sizes = _samples(metrics.render()[0], "sagalog_rocksdb_size_bytes")
        assert sizes == {(("service", "unit"), ("table", "records")): 42}
    finally:
        for remove in undo:
            remove()


def test_a_batch_counts_its_transitions_only_once_committed() -> None:
    tally = Tally()
    tally.begin()
    tally.transitioned("wf-1", _transition("initiated", "running"))
    tally.dead_letter()
    tally.begin()  # the batch was aborted and is decided again
    tally.transitioned("wf-1", _transition("initiated", "running"))
    tally.transitioned("wf-1", _transition("running", "completed", in_state_ms=250))
    tally.committed()
    assert tally.transitions == {
        ("procurement", "1", "initiated", "running"): 1,
        ("procurement", "1", "running", "completed"): 1,
    }
    assert tally.dead_lettered == 0  # the aborted batch's dead letter was never written
    tally.committed()  # nothing pending: counts nothing more
    assert sum(tally.transitions.values()) == 2


def test_decisions_and_dead_letters_of_an_aborted_batch_are_not_counted() -> None:
    decided: Counter[Outcome] = Counter({Outcome.APPLIED: 5})  # before this worker's tally
    tally = Tally(decided=decided)
    tally.begin()
    decided[Outcome.APPLIED] += 2
    decided[Outcome.DUPLICATE] += 1
    tally.dead_letter()
    tally.begin()  # aborted: the processor counted it, the tally forgets it
    decided[Outcome.APPLIED] += 2
    tally.dead_letter()
    tally.committed()
    assert tally.decisions == {Outcome.APPLIED: 2}
    assert tally.dead_lettered == 1
    tally.committed()  # nothing decided since
    assert tally.decisions == {Outcome.APPLIED: 2}


def test_the_time_in_a_state_is_observed_when_a_workflow_leaves_it() -> None:
    labels = {"flow": "procurement", "version": "1", "state": "unit_waiting"}
    before = _samples(metrics.render()[0], "sagalog_time_in_state_seconds_count")
    tally = Tally()
    tally.transitioned("wf-9", _transition("unit_waiting", "running", in_state_ms=4000))
    tally.committed()
    after = _samples(metrics.render()[0], "sagalog_time_in_state_seconds_sum")
    key = tuple(sorted(labels.items()))
    assert after[key] == 4.0
    assert key not in before


def test_librdkafka_lag_is_read_for_the_assigned_partitions_only() -> None:
    stats = {
        "topics": {
            "orders.events": {
                "partitions": {
                    "0": {"desired": True, "consumer_lag": 12},
                    "1": {"desired": False, "consumer_lag": 3},  # not ours
                    "2": {"desired": True, "consumer_lag": -1},  # not known yet
                    "-1": {"desired": False, "consumer_lag": -1},  # librdkafka's own
                }
            }
        }
    }
    assert consumer_lag(json.dumps(stats)) == {("orders.events", 0): 12}
    assert consumer_lag("{}") == {}


def test_librdkafka_statistics_tell_the_assigned_partitions_a_transaction_holds_open() -> None:
    stats = {
        "topics": {
            "orders.events": {
                "partitions": {
                    "0": {"desired": True, "ls_offset": 314, "hi_offset": 327},  # held
                    "1": {"desired": True, "ls_offset": 40, "hi_offset": 40},  # read to its end
                    "2": {"desired": False, "ls_offset": 1, "hi_offset": 9},  # not ours
                    "3": {"desired": True, "ls_offset": -1, "hi_offset": -1},  # not known yet
                }
            }
        }
    }
    assert held_open(json.dumps(stats)) == {("orders.events", 0): (314, 327)}
    assert held_open("{}") == {}


def test_table_sizes_add_up_the_partitions_of_each_table(tmp_path: Path) -> None:
    for name, size in (("records-0.db", 100), ("records-1.db", 50), ("timers-0.db", 7)):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "000001.sst").write_bytes(b"x" * size)
    assert dict(table_sizes(tmp_path)) == {
        ("saga-tracker", "records"): 150,
        ("saga-tracker", "timers"): 7,
    }
    assert list(table_sizes(tmp_path / "missing")) == []


def test_the_health_port_serves_prometheus_text_on_metrics() -> None:
    ok = Verdict(ok=True, body={"status": "ok"})
    server = HealthServer(live=lambda: ok, ready=lambda: ok, host="127.0.0.1", port=0).start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain")
            names = {f.name for f in text_string_to_metric_families(answer.read().decode())}
        assert "process_cpu_seconds" in names or "python_gc_objects_collected" in names
        try:
            urllib.request.urlopen(f"{url}/nope", timeout=5)
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
            assert "/metrics" in json.loads(exc.read())["error"]
    finally:
        server.stop()


def test_every_exported_name_follows_the_conventions() -> None:
    names: set[str] = metrics.exported_names()
    assert all(name.startswith("sagalog_") for name in names)
    counters = {f.exported for f in metrics.FAMILIES if f.kind == "counter"}
    assert all(name.endswith("_total") for name in counters)
    units = ("_seconds", "_bytes", "_records", "_state", "_total", "_tokens", "_micros")
    # Gauges of things counted: the unit is the name (workflows, open connections).
    counted_in_themselves = {"sagalog_workflows", "sagalog_gateway_live_connections"}
    assert all(any(u in name for u in units) or name in counted_in_themselves for name in names), (
        sorted(names)
    )
