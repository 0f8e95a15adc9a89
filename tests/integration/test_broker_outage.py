"""A broker's loss and return is an outage every service rides out, never a crash.

The reference workflow's real services (stand-ins, tracker, gateway, six agents,
each a process; the chaos suite's fleet, ``chaos_run`` in ``tests/stacks.py``) on the
run's **private** single broker, which these tests SIGKILL and restart, or SIGSTOP
and SIGCONT (never the shared stack). The chaos supervisor restarts what exits and
counts it; every test here asserts it counted nothing while it ran. Waits are
bounded polls for a condition, never sleeps that assert timing.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from chaos import faults
from chaos.harness import ChaosRun, Fault
from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings
from waiting import poll


@pytest.fixture
def outage(chaos_run: ChaosRun) -> Iterator[ChaosRun]:
    """The run's chaos fleet (``tests/stacks.py``); a test here may not add to its exits."""
    before = list(chaos_run.supervisor.exits)
    yield chaos_run
    during = chaos_run.supervisor.exits[len(before) :]
    assert during == [], f"services exited (the supervisor restarted them): {during}"


class Http:
    def __init__(self, run: ChaosRun) -> None:
        self.base = run.fleet.urls["gateway"]
        self.key = run.fleet.config.api_key

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        request = urllib.request.Request(
            self.base + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"X-API-Key": self.key, "Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, _lower(reply.headers), json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, _lower(exc.headers), json.loads(exc.read() or b"null")


def settled_workflow(run: ChaosRun, http: Http) -> str:
    """A workflow the gateway knows: submit one and wait until it is read."""
    requests = run.plan(Fault("warm-up", faults.agent_kill, workflows=2))
    run.submit(requests, over_s=0.1)
    workflow_id = requests[0].workflow_id
    poll(
        lambda: http.call("GET", f"/v1/workflows/{workflow_id}")[0] == 200,
        what=f"the gateway reads {workflow_id}",
        timeout=120,
    )
    return workflow_id


def test_the_gateway_serves_reads_and_503s_writes_with_retry_after_while_the_broker_is_down(
    outage: ChaosRun,
) -> None:
    http = Http(outage)
    workflow_id = settled_workflow(outage, http)
    webhook = f"/v1/webhooks/signature.completed?workflow_id={workflow_id}"
    broker = outage.stack.leader_of(outage.topic, 0)
    broker.kill()
    try:
        status, headers, body = http.call("POST", webhook, {"n": 1}, {"Idempotency-Key": "k-1"})
        assert status == 503, body
        assert int(headers["retry-after"]) >= 1
        assert set(body) == {"error", "detail"} and "not acknowledged" in body["error"]
        health = poll(
            lambda: (
                (h := http.call("GET", "/healthz"))[0] == 200 and h[2]["status"] == "degraded" and h
            ),
            what="/healthz says degraded (and stays 200)",
            timeout=60,
        )
        assert "kafka" in health[2]["problems"] or "publish" in health[2]["problems"]
        status, _, record = http.call("GET", f"/v1/workflows/{workflow_id}")
        assert status == 200 and record["workflow_id"] == workflow_id  # from RocksDB
        assert http.call("GET", "/v1/gates")[0] == 200
    finally:
        broker.restart()
    poll(
        lambda: http.call("GET", "/healthz")[2]["status"] == "ok",
        what="/healthz ok again after the broker returned",
        timeout=120,
    )
    status, _, accepted = poll(
        lambda: (
            (r := http.call("POST", webhook, {"n": 1}, {"Idempotency-Key": "k-1"}))[0] == 202 and r
        ),
        what="the webhook accepted after the outage",
        timeout=60,
    )
    assert accepted["workflow_id"] == workflow_id


def test_gateway_client_retries_a_write_through_a_short_outage(outage: ChaosRun) -> None:
    http = Http(outage)
    workflow_id = settled_workflow(outage, http)
    client = GatewayClient(
        GatewayClientSettings(url=http.base, api_key=http.key, timeout_s=30, retry_for_s=180)
    )
    result: dict[str, Any] = {}
    broker = outage.stack.brokers()[0]
    broker.pause()
    try:
        worker = threading.Thread(
            target=lambda: result.update(
                reply=client.post(
                    f"/v1/webhooks/callback.done?workflow_id={workflow_id}",
                    {"ok": True},
                    headers={"Idempotency-Key": "retried-through-a-pause"},
                )
            ),
            daemon=True,
        )
        worker.start()
        poll(lambda: client.retried >= 1, what="the client waited out a 503", timeout=90)
    finally:
        broker.resume()
    worker.join(180)
    assert "reply" in result, "the client gave up"
    assert result["reply"]["workflow_id"] == workflow_id


def test_tracker_agents_and_gateway_ride_out_a_broker_sigkill_and_restart(
    outage: ChaosRun,
) -> None:
    result = outage.round(
        Fault(
            "broker SIGKILL + restart",
            faults.broker_kill_once,
            window_s=25,
            workflows=20,
            max_exits=0,
        )
    )
    assert result.ok, (result.failures, result.row())
    assert result.exits == 0 and result.lost == result.duplicated_effects == result.stuck == 0
    logs = [
        s.log.read_text(errors="replace")
        for name, s in outage.fleet.services.items()
        if name.endswith("_agent")
    ]
    fenced = sum(t.count("Static consumer fenced") for t in logs)
    hung = sum(t.count('"outcome": "hung"') for t in logs)
    rebuilt = sum(t.count('"action": "recover"') for t in logs)
    print(  # what the agents rode out in-process (varies run to run: not asserted)
        f"broker kill: recovery {result.recovery_s}s; agents: {fenced} fencing lines, "
        f"{hung} hung calls abandoned, {rebuilt} client rebuilds; gateway "
        f"{result.figures.get('gateway_reads_ok')} reads ok"
    )


def test_the_same_through_a_broker_pause(outage: ChaosRun) -> None:
    result = outage.round(
        Fault("broker SIGSTOP", faults.broker_pause, window_s=30, workflows=20, max_exits=0)
    )
    assert result.ok, (result.failures, result.row())


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}
