"""Co-hosted agents against the real broker: the same inputs give the same outputs as
the same agents alone.

Two relay agents (classify: RequestSubmitted -> RequestClassified; retrieve:
RequestClassified -> PoliciesRetrieved, so the second reacts to the first's output)
run on two topics holding the same 60 requests: on one each alone in its own
worker, on the other both in one worker, with one consumer and one transaction per
batch. Outputs are read back read_committed and compared but for what is minted as
a record is built (its event id, time and hash, and the causation ids naming one).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from procurement.events import PoliciesRetrieved, RequestClassified, RequestSubmitted
from sagalog.agents import Agent, AgentSettings, HandlerContext
from sagalog.agents.worker import AgentWorker
from sagalog.contracts.headers import header_dict
from sagalog.flows.model import Flow
from sagalog.publisher import EventPublisher

from .agent_harness import request
from .project import Project

WORKFLOWS = 60
SUBMITTED = "procurement.v1.RequestSubmitted"
RETRIEVED = "procurement.v1.PoliciesRetrieved"
CHAIN_TOPICS = """
ignore: ["*"]
topics:
  chain.alone.{s}:
    partitions: 3
    schemas: [procurement.v1.RequestSubmitted, procurement.v1.RequestClassified,
              procurement.v1.PoliciesRetrieved]
  chain.together.{s}:
    partitions: 3
    schemas: [procurement.v1.RequestSubmitted, procurement.v1.RequestClassified,
              procurement.v1.PoliciesRetrieved]
  deadletter.{s}:
    partitions: 1
"""


def agent_settings(project: Project, data_dir: Path) -> AgentSettings:
    return AgentSettings(
        **project.settings.model_dump(),
        instance_id="it",
        data_dir=data_dir,
        deadletter_topic=project.topic("deadletter"),
        log_level="WARNING",
        tracing=False,
    )


def chain(project: Project, topic: str) -> list[Flow]:
    """The flow of the two agents on ``topic``: each run binds the same agents to its own
    topic's flow, so their names (and what they write) are the same on both."""
    steps = [
        ("classify", "it-classify", SUBMITTED, "procurement.v1.RequestClassified"),
        ("retrieve", "it-retrieve", "procurement.v1.RequestClassified", RETRIEVED),
    ]
    return [
        Flow.model_validate(
            {
                "flow": "chain",
                "version": 1,
                "topic": topic,
                "starts_on": SUBMITTED,
                "deadline": "1d",
                "steps": [
                    {
                        "name": name,
                        "agent": f"{agent}-{project.suffix}",
                        "starts_on": starts,
                        "completes_on": completes,
                        "timeout": "5m",
                        "effect": "none",
                    }
                    for name, agent, starts, completes in steps
                ],
            }
        )
    ]


def classify(project: Project) -> Agent:
    agent = Agent(f"it-classify-{project.suffix}")

    @agent.handles(step="classify")
    async def handle(event: RequestSubmitted, ctx: HandlerContext) -> RequestClassified:
        return RequestClassified(
            request_id=event.request_id,
            category="hardware",
            confidence=0.9,
            extracted={"title": event.title},
            classifier="it",
        )

    return agent


def retrieve(project: Project) -> Agent:
    agent = Agent(f"it-retrieve-{project.suffix}")

    @agent.handles(step="retrieve")
    async def handle(event: RequestClassified, ctx: HandlerContext) -> PoliciesRetrieved:
        return PoliciesRetrieved(request_id=event.request_id, documents=[], retriever="it")

    return agent


class Running:
    """A worker run on a thread of the test, stopped as SIGTERM would stop it."""

    def __init__(self, worker: AgentWorker) -> None:
        self.worker = worker
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"worker-{worker.name}")
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run(install_signals=False)
        except BaseException as exc:  # reported by the test, not lost on the thread
            self.failure = exc

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(60)
        assert not self.thread.is_alive(), f"{self.worker.name} did not stop"
        assert self.failure is None, self.failure


def outputs(project: Project, topic: str) -> list[tuple[Any, ...]]:
    """What the agents wrote to ``topic`` (read_committed), but for what is minted."""
    consumer = Consumer(
        project.settings.kafka_config(
            **{
                "group.id": f"it-cohosted-reader-{topic}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
    )
    try:
        out = []
        for partition in range(3):
            tp = TopicPartition(topic, partition, OFFSET_BEGINNING)
            _, end = consumer.get_watermark_offsets(tp, timeout=10)
            consumer.assign([tp])
            while (position := consumer.position([tp])[0].offset) < end - 1 or position < 0:
                message = consumer.poll(5)
                if message is None:
                    break
                if message.error():
                    continue
                headers = header_dict(message.headers())
                if headers["ce_type"] == SUBMITTED:
                    continue
                out.append(
                    (
                        message.partition(),
                        message.key(),
                        message.value(),
                        headers["ce_type"],
                        headers["ce_source"],
                        headers["ce_workflowid"],
                    )
                )
        return sorted(out, key=repr)
    finally:
        consumer.close()


def wait_for(project: Project, topic: str, count: int, timeout: float = 120) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = outputs(project, topic)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(1)


def test_co_hosted_agents_write_what_they_write_alone(project: Project, tmp_path: Path) -> None:
    project.write_topology(CHAIN_TOPICS)
    project.apply()
    alone_topic = project.topic("chain.alone")
    together_topic = project.topic("chain.together")
    publisher = EventPublisher(project.settings, catalog=project.catalog, source="tests/cohost")
    for n in range(WORKFLOWS):
        for topic in (alone_topic, together_topic):
            publisher.publish(
                topic, SUBMITTED, request(n), workflow_id=f"wf-{n}", event_id=f"evt-{n}"
            )
    publisher.close()

    settings = agent_settings(project, tmp_path / "alone")
    alone = [
        Running(
            AgentWorker(
                make(project), settings, catalog=project.catalog, flows=chain(project, alone_topic)
            )
        )
        for make in (classify, retrieve)
    ]
    settings = agent_settings(project, tmp_path / "together")
    members = [(make(project), settings) for make in (classify, retrieve)]
    cohost = AgentWorker(
        members, settings, catalog=project.catalog, flows=chain(project, together_topic)
    )
    together = Running(cohost)
    try:
        by_alone = wait_for(project, alone_topic, 2 * WORKFLOWS)
        by_together = wait_for(project, together_topic, 2 * WORKFLOWS)
    finally:
        for running in [*alone, together]:
            running.stop()

    kinds = Counter(kind for *_, kind, _, _ in by_together)
    assert kinds == {
        "procurement.v1.RequestClassified": WORKFLOWS,
        "procurement.v1.PoliciesRetrieved": WORKFLOWS,
    }, kinds
    assert by_together == by_alone
    handled = [lane.telemetry.stats.handled for lane in cohost.lanes]
    assert handled == [r.worker.stats.handled for r in alone] == [WORKFLOWS, WORKFLOWS]
    # The co-host's one group read the whole topic for both agents (the offsets pass
    # its 180 records and their transactions' markers).
    names = sorted(lane.name for lane in cohost.lanes)
    assert cohost.group_id == f"sagalog-agent-{names[0]}+{names[1]}"
    assert committed(project, cohost.group_id, together_topic) >= 3 * WORKFLOWS


def committed(project: Project, group: str, topic: str) -> int:
    """The offsets ``group`` committed on ``topic``, summed over its partitions."""
    consumer = Consumer(project.settings.kafka_config(**{"group.id": group}))
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        return sum(max(tp.offset, 0) for tp in offsets)
    finally:
        consumer.close()
