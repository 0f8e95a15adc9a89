"""Drive the gateway as an OS process next to a ``TrackerLab``'s tracker.

``GatewayLab`` wraps a ``TrackerLab`` (unchanged): it adds ``WebhookReceived`` to the
lab's workflow topic, starts the tracker and ``python -m sagalog.services.gateway`` on a
free port with its own RocksDB directory, and offers the few calls the tests make: HTTP
requests with or without the API key, the workflow topic's end offsets (to prove a refused request
published nothing) and the events of one type on it.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from processes import ServiceProcess
from sagalog import client_config
from sagalog.contracts.headers import header_dict
from sagalog.service_process import free_port

from .project import REPO
from .tracker_harness import SECRET, TOPOLOGY, TrackerLab

API_KEY = "integration-key-0123456789"


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class GatewayProcess(ServiceProcess):
    """The gateway as an OS process, serving on ``url``."""

    def __init__(self, *, env: dict[str, str], log: Path, url: str) -> None:
        super().__init__(env=env, log=log, module="sagalog.services.gateway")
        self.url = url

    def start(self) -> GatewayProcess:
        super().start()
        return self


class GatewayLab:
    def __init__(self, lab: TrackerLab, tmp: Path) -> None:
        self.lab = lab
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.gateway: GatewayProcess | None = None

    def setup(self) -> GatewayLab:
        topology = TOPOLOGY.replace(
            "sagalog.v1.EffectRecorded", "sagalog.v1.EffectRecorded, sagalog.v1.WebhookReceived"
        )
        self.lab.project.write_topology(topology)
        self.lab.project.apply()
        self.lab.tracker()
        return self

    def start_gateway(self, *, data_dir: str = "gateway", **settings: Any) -> GatewayProcess:
        project = self.lab.project
        env = {
            **os.environ,
            **client_config.environment(project.settings),
            "PYTHONPATH": os.pathsep.join(
                [str(REPO / "services"), os.environ.get("PYTHONPATH", "")]
            ),
            "GATEWAY_PROJECT_DIR": str(project.root),
            "GATEWAY_TRACKER_APP_ID": self.lab.app_id,
            "GATEWAY_TRANSITIONS_TOPIC": self.lab.transitions_topic,
            "GATEWAY_GATE_SECRET": SECRET,
            "GATEWAY_API_KEYS": f"{API_KEY},second-key",
            "GATEWAY_DATA_DIR": str(self.tmp / data_dir),
            "GATEWAY_PORT": str(self.port),
            "GATEWAY_MAX_BODY_BYTES": "4096",
            "GATEWAY_LAG_INTERVAL_S": "0.5",
            **{f"GATEWAY_{k.upper()}": str(v) for k, v in settings.items()},
        }
        self.gateway = GatewayProcess(env=env, log=self.tmp / "gateway.log", url=self.url).start()
        self.wait(self._ready, what="gateway /healthz ready", timeout=60)
        return self.gateway

    def _ready(self) -> bool:
        try:
            return self.call("GET", "/healthz", key=None).status == 200
        except OSError:
            return False

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()

    # -- HTTP ------------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        key: str | None = API_KEY,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            sent["X-API-Key"] = key
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return Reply(reply.status, _json(reply.read()), dict(reply.headers))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, _json(exc.read()), dict(exc.headers))

    # -- the workflow topic ----------------------------------------------------------

    def end_offsets(self) -> dict[int, int]:
        consumer = self._consumer()
        try:
            topic = self.lab.topic
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions
            }
        finally:
            consumer.close()

    def events_on_topic(self, event_type: str) -> list[dict[str, str]]:
        """The headers of every ``event_type`` event on the workflow topic, read to its end."""
        consumer = self._consumer(**{"enable.partition.eof": True})
        topic = self.lab.topic
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        found, done = [], set()
        try:
            while len(done) < len(partitions):
                for message in consumer.consume(500, 1.0):
                    if message.error() is not None:
                        done.add(message.partition())
                        continue
                    headers = header_dict(message.headers())
                    if headers.get("ce_type") == event_type:
                        found.append(headers)
        finally:
            consumer.close()
        return found

    def _consumer(self, **overrides: Any) -> Consumer:
        return Consumer(
            self.lab.project.settings.kafka_config(
                **{
                    "group.id": f"gateway-test-{uuid.uuid4()}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    **overrides,
                }
            )
        )

    # -- waiting -----------------------------------------------------------------------

    def wait(self, condition: Callable[[], bool], *, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            process = self.gateway.process if self.gateway else None
            if process is not None and process.poll() is not None:
                pytest.fail(f"gateway exited {process.returncode}:\n{self.gateway.logs()[-5000:]}")
            time.sleep(0.1)
        logs = self.gateway.logs()[-5000:] if self.gateway else ""
        pytest.fail(f"timed out waiting for {what}\n{logs}")

    def drive_to_gate(self, workflow_id: str) -> None:
        """Start ``workflow_id`` and complete the three steps before the gate, as agents."""
        lab = self.lab
        lab.start(workflow_id)
        for step in ("reserve_budget", "classify_request", "retrieve_policies"):
            lab.wait(
                lambda step=step: any(
                    t["to_state"] == "running" and t["step"] == step
                    for t in lab.transitions(workflow_id)
                ),
                what=f"{workflow_id} running {step}",
            )
            lab.complete(workflow_id, step)
        lab.wait_state(workflow_id, "pending_approval")


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


@pytest.fixture
def gateway_lab(tracker_lab: TrackerLab, tmp_path: Path) -> Iterator[GatewayLab]:
    lab = GatewayLab(tracker_lab, tmp_path).setup()
    try:
        yield lab
    finally:
        lab.close()
