"""Run any of the procurement agent services as processes on one throwaway topic.

The generic sibling of ``agent_harness`` (which drives the budget agent alone): a
``ServiceLab`` owns a topic set with every procurement event type, the effect
stand-ins the services call (ledger, ERP, mail), and agent processes started by
module name with their own env prefix. What the agents did is read back from the
log (read_committed) and from the stand-ins' own books.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.publisher import EventPublisher
from standins.server import StandinServer, serve

from .agent_harness import AgentProcess, read_until
from .project import REPO, Project

PROCUREMENT_TOPICS = """
ignore: ["*"]
topics:
  procurement.events.{s}:
    partitions: 3
    schemas: [procurement.v1.RequestSubmitted, procurement.v1.RequestClassified,
              procurement.v1.PoliciesRetrieved, procurement.v1.RiskScored,
              procurement.v1.BudgetReserved, procurement.v1.BudgetReleased,
              procurement.v1.PurchaseOrderCreated, procurement.v1.PurchaseOrderCancelled,
              procurement.v1.VendorNotified, procurement.v1.CorrectionNoticeSent,
              sagalog.v1.StepFailed, sagalog.v1.EffectRecorded, sagalog.v1.GateOpened,
              sagalog.v1.GateDecided, sagalog.v1.CompensationRequested,
              sagalog.v1.CompensationCompleted]
  deadletter.{s}:
    partitions: 1
"""

# module -> (env prefix, the stand-ins it calls as {setting: stand-in name})
SERVICES: dict[str, tuple[str, dict[str, str]]] = {
    "intake_agent": ("INTAKE_AGENT", {}),
    "retrieval_agent": ("RETRIEVAL_AGENT", {}),
    "risk_agent": ("RISK_AGENT", {}),
    "budget_agent": ("BUDGET_AGENT", {"ledger_url": "ledger"}),
    "purchasing_agent": ("PURCHASING_AGENT", {"erp_url": "erp"}),
    "notification_agent": ("NOTIFICATION_AGENT", {"mail_url": "mail"}),
}


@dataclass
class ServiceLab:
    """A throwaway procurement topic, the stand-ins, and agent processes on them."""

    project: Project
    tmp: Path
    standins: dict[str, StandinServer]
    processes: dict[str, AgentProcess] = field(default_factory=dict)

    @property
    def topic(self) -> str:
        return self.project.topic("procurement.events")

    @property
    def deadletter(self) -> str:
        return self.project.topic("deadletter")

    def url(self, standin: str) -> str:
        host, port = self.standins[standin].server_address[:2]
        return f"http://{host!s}:{port}"

    def agent_name(self, module: str) -> str:
        """The agent's name in this lab (unique on the shared cluster: it names the
        consumer group and the retry topic)."""
        return f"{module.replace('_', '-')}-{self.project.suffix}"

    def start(self, module: str, **settings: Any) -> AgentProcess:
        """Start ``python -m <module>`` with its settings (``top_k=3`` becomes
        ``RETRIEVAL_AGENT_TOP_K=3``)."""
        prefix, standins = SERVICES[module]
        values: dict[str, Any] = {
            "name": self.agent_name(module),  # on the steps of the project's flow
            "instance_id": "a",
            "data_dir": self.tmp / "data" / module,
            "project_dir": self.project.root,
            "deadletter_topic": self.deadletter,
            "bootstrap_servers": self.project.settings.bootstrap_servers,
            "schema_registry_url": self.project.settings.schema_registry_url,
            "retry_base_delay_s": 0.2,
            "retry_max_delay_s": 1.0,
            **{setting: self.url(standin) for setting, standin in standins.items()},
            **settings,
        }
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO / "services"), os.environ.get("PYTHONPATH", "")]
            ),
            **{f"{prefix}_{key.upper()}": str(value) for key, value in values.items()},
        }
        process = AgentProcess(
            env=env, log=self.tmp / f"{module}.log", cwd=self.project.root, module=module
        )
        self.processes[module] = process
        return process.start()

    def publisher(self) -> EventPublisher:
        return EventPublisher(
            self.project.settings, catalog=self.project.catalog, source="tests/procurement"
        )

    def codec(self) -> EventCodec:
        return EventCodec(
            catalog=self.project.catalog, registry=SchemaRegistry(self.project.settings)
        )

    def records(
        self, *, expect: Callable[[list[dict[str, Any]]], bool], timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """Read the topic (read_committed) until ``expect(records)`` holds or time runs
        out; each record has its decoded ``payload``."""
        codec = self.codec()

        def decoded(records: list[dict[str, Any]]) -> bool:
            for record in records:
                if "payload" not in record:
                    record["payload"] = codec.decode(record["value"]).payload
            return expect(records)

        return read_until(
            self.project.settings.kafka_config(), self.topic, expect=decoded, timeout=timeout
        )

    def log(self, module: str) -> str:
        process = self.processes.get(module)
        return process.log.read_text() if process is not None and process.log.exists() else ""

    def wait_for_log(self, module: str, text: str, *, count: int = 1, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log(module).count(text) >= count:
                return True
            time.sleep(0.1)
        return self.log(module).count(text) >= count


def of_type(records: list[dict[str, Any]], event_type: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == event_type]


def in_workflow(records: list[dict[str, Any]], workflow_id: str) -> list[dict[str, Any]]:
    return [r for r in records if r["headers"].get("ce_workflowid") == workflow_id]


@pytest.fixture
def service_lab(project: Project, tmp_path: Path) -> Iterator[ServiceLab]:
    project.write_topology(PROCUREMENT_TOPICS)
    # the agents run as <name>-<suffix>: the flow names them so
    project.write_reference_flow("procurement.v1", agent_suffix=f"-{project.suffix}")
    project.apply()
    lab = ServiceLab(
        project=project,
        tmp=tmp_path,
        standins={name: serve(name=name) for name in ("ledger", "erp", "mail")},
    )
    yield lab
    for process in lab.processes.values():
        process.kill()
    for standin in lab.standins.values():
        standin.shutdown()
