"""A denied right ends the agent's transaction and the agent: exit 6, naming who and what."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from sagalog.agents.settings import AgentSettings
from sagalog.agents.worker import AgentWorker
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import AuthorizationError

from .test_agents_worker import FLOWS, budget_agent


class _Producer:
    def __init__(self) -> None:
        self.aborted = 0

    def abort_transaction(self, timeout: float) -> None:
        self.aborted += 1


def worker(tmp_path: Path, catalog: SchemaCatalog) -> tuple[AgentWorker, _Producer]:
    settings = AgentSettings(
        security_protocol="SASL_SSL",
        sasl_username="budget-agent",
        instance_id="b-1",
        data_dir=tmp_path,
    )
    built = AgentWorker(budget_agent(), settings, catalog=catalog, flows=FLOWS)
    producer = _Producer()
    built.clients.producer = producer  # type: ignore[assignment]
    return built, producer


@pytest.mark.parametrize(
    ("code", "denied", "expected"),
    [
        (
            KafkaError._INCONSISTENT,
            [("sagalog.alerts", KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))],
            "User:budget-agent may not WRITE topic 'sagalog.alerts'",
        ),
        (
            KafkaError.GROUP_AUTHORIZATION_FAILED,
            [],
            "User:budget-agent may not READ group 'sagalog-agent-budget-agent'",
        ),
        (
            KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            [],
            "User:budget-agent may not WRITE transactional id 'sagalog-agent-budget-agent-b-1'",
        ),
    ],
)
def test_a_denied_transaction_is_aborted_and_raised(
    tmp_path: Path,
    catalog: SchemaCatalog,
    code: int,
    denied: list[tuple[str, KafkaError]],
    expected: str,
) -> None:
    agent, producer = worker(tmp_path, catalog)
    with pytest.raises(AuthorizationError) as caught:
        agent.transactions.raise_if_denied(KafkaException(KafkaError(code)), denied)
    assert str(caught.value).startswith(expected), caught.value
    assert caught.value.exit_code == 6
    assert (producer.aborted, agent.stats.aborted) == (1, 1)


def test_other_transaction_errors_take_the_usual_path(
    tmp_path: Path, catalog: SchemaCatalog
) -> None:
    agent, producer = worker(tmp_path, catalog)
    agent.transactions.raise_if_denied(KafkaException(KafkaError(KafkaError._TIMED_OUT)), [])
    assert producer.aborted == 0
