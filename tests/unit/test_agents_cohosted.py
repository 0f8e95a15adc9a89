"""Co-hosted agents decide exactly as they do alone: the same records in, the same
records out, in one transaction instead of one per agent.

Two agents read one topic: the budget agent (``RequestSubmitted`` -> ``BudgetReserved``,
a dead letter for a vendor it refuses) and a classifier (``BudgetReserved`` ->
``RequestClassified``). The same batch, retries included, goes to each alone and to
both in one worker, through the recording clients of ``test_agents_worker``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from procurement.events import BudgetReserved, RequestClassified
from sagalog.agents import Agent, AgentSettings, HandlerContext
from sagalog.agents.worker import COHOSTED_BATCH_INTERVAL_S, AgentWorker
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import ConfigurationError
from sagalog.topic_names import retry_topic_for

from .test_agents_worker import (
    DLQ,
    FLOWS,
    NOW_MS,
    TOPIC,
    Consumer,
    KnownIds,
    Producer,
    budget_agent,
    record,
    retried,
    submitted,
)


def classify_agent() -> Agent:
    agent = Agent("classify-agent")

    @agent.handles(step="classify_request")
    async def classify(event: BudgetReserved, ctx: HandlerContext) -> RequestClassified:
        return RequestClassified(
            request_id=ctx.workflow_id,
            category="hardware",
            confidence=0.9,
            extracted={"cost_center": event.cost_center},
            classifier="unit",
        )

    return agent


def settings(data_dir: Path) -> AgentSettings:
    return AgentSettings(
        instance_id="unit",
        data_dir=data_dir,
        log_level="WARNING",
        tracing=False,
        max_attempts=3,
        retry_base_delay_s=1.0,
        deadletter_topic=DLQ,
    )


def built(
    agents: Agent | list[tuple[Agent, AgentSettings]], data_dir: Path, catalog: SchemaCatalog
) -> Any:
    worker = AgentWorker(
        agents, settings(data_dir), catalog=catalog, wall_ms=lambda: NOW_MS, flows=FLOWS
    )
    worker.codec.registry = KnownIds(catalog)  # type: ignore[assignment]
    worker.clients.producer = Producer()  # type: ignore[assignment]
    worker.clients.consumer = Consumer()  # type: ignore[assignment]
    worker._open_stores()
    return worker


def reserved(workflow_id: str) -> BudgetReserved:
    return BudgetReserved(
        reservation_id=f"R-{workflow_id}", cost_center="CC-9", amount="5.00", currency="EUR"
    )


def batches(worker: Any) -> list[list[Any]]:
    """Two batches: new requests, reservations, a refused vendor, a duplicate, and a
    retry of an event the budget agent had failed on (its retry topic is its own)."""
    first = [
        record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=1),
        record(worker, reserved("wf-2"), workflow_id="wf-2", event_id="e2", offset=2),
        record(
            worker, submitted("wf-3", vendor="broken"), workflow_id="wf-3", event_id="e3", offset=3
        ),
        record(worker, submitted("wf-1"), workflow_id="wf-1", event_id="e1", offset=4),
    ]
    again = retried(
        record(worker, submitted("wf-4"), workflow_id="wf-4", event_id="e4", offset=5),
        offset=0,
        attempt=1,
        due_ms=NOW_MS - 1,
    )
    second = [
        again,
        record(worker, reserved("wf-4"), workflow_id="wf-4", event_id="e5", offset=6),
    ]
    return [first, second]


#: Headers minted as a record is built: a new event's id and time, and the hash over them.
MINTED = {"ce_id", "ce_time", "sagalog_hash"}


def produced(*workers: Any) -> list[tuple[str, Any, Any, tuple[Any, ...]]]:
    """Every record the workers' transactions committed, but for what is minted as it
    is built, in a comparable order."""
    out = []
    for worker in workers:
        for transaction in worker.clients.producer.committed:
            for topic, key, value, headers in transaction:
                kept = tuple((k, v) for k, v in headers if k not in MINTED)
                out.append((topic, key, value, kept))
    return sorted(out, key=repr)


def run(worker: Any, records: list[list[Any]]) -> None:
    for batch in records:
        # alone, an agent polls only its own retry topic: the other's retries are not its
        mine = [r for r in batch if any(r.topic() in lane.topics for lane in worker.lanes)]
        worker._process(mine)


@pytest.fixture
def catalog() -> SchemaCatalog:
    return SchemaCatalog.load(Path(__file__).resolve().parents[2] / "schemas")


def test_co_hosted_agents_produce_what_they_produce_alone_in_one_transaction(
    tmp_path: Path, catalog: SchemaCatalog
) -> None:
    budget = built(budget_agent(), tmp_path / "budget", catalog)
    classify = built(classify_agent(), tmp_path / "classify", catalog)
    both = built(
        [(budget_agent(), settings(tmp_path)), (classify_agent(), settings(tmp_path))],
        tmp_path / "both",
        catalog,
    )
    records = batches(budget)
    for worker in (budget, classify, both):
        run(worker, records)

    alone, together = produced(budget, classify), produced(both)
    assert together == alone
    kinds = sorted((t, dict(h)["ce_type"]) for t, _, _, h in together)
    assert kinds == [
        (TOPIC, "procurement.v1.BudgetReserved"),  # wf-1, and wf-4 from its retry
        (TOPIC, "procurement.v1.BudgetReserved"),
        (TOPIC, "procurement.v1.RequestClassified"),  # wf-2 and wf-4
        (TOPIC, "procurement.v1.RequestClassified"),
        (TOPIC, "sagalog.v1.StepFailed"),  # the refused vendor, wf-3
        (DLQ, "procurement.v1.RequestSubmitted"),
    ]
    # one transaction per batch for both, where each alone opened its own
    assert len(both.clients.producer.committed) == 2
    assert len(budget.clients.producer.committed) + len(classify.clients.producer.committed) == 4
    for lane, single in zip(both.lanes, (budget, classify), strict=True):
        assert vars(lane.telemetry.stats) == {
            **vars(single.stats),
            "transactions": 0,  # the co-host's, counted once for the process
            "aborted": 0,
        }
        assert lane.store.checkpoint(TOPIC, 0) == single.store.checkpoint(TOPIC, 0) == 7
    assert both.stats.transactions == 2
    for worker in (budget, classify, both):
        for lane in worker.lanes:
            lane.store.close()


def test_a_co_host_is_named_for_its_agents_in_any_order(
    tmp_path: Path, catalog: SchemaCatalog
) -> None:
    one = built(
        [(budget_agent(), settings(tmp_path)), (classify_agent(), settings(tmp_path))],
        tmp_path / "one",
        catalog,
    )
    other = built(
        [(classify_agent(), settings(tmp_path)), (budget_agent(), settings(tmp_path))],
        tmp_path / "other",
        catalog,
    )
    assert one.group_id == other.group_id == "sagalog-agent-budget-agent+classify-agent"
    assert one.transactional_id == "sagalog-agent-budget-agent+classify-agent-unit"
    assert set(one.clients.topics) == {
        TOPIC,
        retry_topic_for("budget-agent"),
        retry_topic_for("classify-agent"),
    }
    alone = built(budget_agent(), tmp_path / "alone", catalog)
    assert alone.group_id == "sagalog-agent-budget-agent"  # unchanged by co-hosting
    for worker in (one, other, alone):
        for lane in worker.lanes:
            lane.store.close()


def test_the_same_agent_twice_in_one_process_is_refused(
    tmp_path: Path, catalog: SchemaCatalog
) -> None:
    with pytest.raises(ConfigurationError, match="named twice"):
        AgentWorker(
            [(budget_agent(), settings(tmp_path)), (budget_agent(), settings(tmp_path))],
            settings(tmp_path),
            catalog=catalog,
            flows=FLOWS,
        )


def test_a_co_host_batches_every_20_ms_unless_told_otherwise(
    tmp_path: Path, catalog: SchemaCatalog
) -> None:
    members = [(budget_agent(), settings(tmp_path)), (classify_agent(), settings(tmp_path))]
    default = AgentWorker(members, settings(tmp_path), catalog=catalog, flows=FLOWS)
    assert default.settings.batch_interval_s == COHOSTED_BATCH_INTERVAL_S == 0.02
    chosen = AgentWorker(
        members,
        settings(tmp_path).model_copy(update={"batch_interval_s": 0.05}),
        catalog=catalog,
        flows=FLOWS,
    )
    assert chosen.settings.batch_interval_s == 0.05  # set, so kept
    alone = AgentWorker(budget_agent(), settings(tmp_path), catalog=catalog, flows=FLOWS)
    assert alone.settings.batch_interval_s == 0.05  # the agents' default, unchanged
