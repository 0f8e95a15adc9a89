"""A poisoned event replayed from the dead-letter topic after its handler is fixed
(issue 22, item 5), on the real broker and registry, every service a process.

The tracker (virtual clock), the gateway and a real agent (``poisoned_agent``) run
on throwaway topics with the five-step test flow. The agent reserves the budget; the
test fails the next step, so the tracker asks the agent to release the budget, and
the agent's release has a bug: the request is dead-lettered and the workflow waits,
compensating. The agent is restarted with the bug fixed, an operator replays the dead
letter with ``sagalog dlq replay`` through the gateway, and the workflow ends
compensated. Its audit trail shows the replay and who asked for it; a second replay
is refused, and wrong positions get a 4xx that says what to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from sagalog import client_config
from sagalog.dead_letters import H_REPLAY_OF

from .agent_harness import AgentProcess
from .gateway_harness import API_KEY, GatewayLab
from .project import REPO
from .tracker_harness import TOPOLOGY, TrackerLab, tracker_lab  # noqa: F401

REPLAYED = "sagalog.v1.DeadLetterReplayed"
RELEASE = "sagalog.v1.CompensationRequested"


def cli(gw: GatewayLab, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAGALOG_GATEWAY_URL": gw.url, "SAGALOG_GATEWAY_API_KEY": API_KEY}
    return subprocess.run(
        [sys.executable, "-m", "sagalog", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def start_agent(lab: TrackerLab, tmp: Path, *, broken: bool) -> AgentProcess:
    env = {
        **os.environ,
        **client_config.environment(lab.project.settings),
        "PYTHONPATH": os.pathsep.join(
            [str(REPO), str(REPO / "services"), os.environ.get("PYTHONPATH", "")]
        ),
        "POISONED_AGENT_NAME": f"budget-{lab.suffix}",
        "POISONED_AGENT_INSTANCE_ID": "a",
        "POISONED_AGENT_DATA_DIR": str(tmp / "agent-data"),
        "POISONED_AGENT_PROJECT_DIR": str(lab.project.root),
        "POISONED_AGENT_DEADLETTER_TOPIC": lab.deadletter_topic,
        "POISONED_AGENT_RELEASE_BROKEN": "true" if broken else "false",
    }
    return AgentProcess(
        env=env,
        log=tmp / "agent.log",
        cwd=lab.project.root,
        module="tests.integration.poisoned_agent",
    ).start()


def test_a_poisoned_compensation_is_replayed_after_the_fix_and_the_audit_says_who_asked(
    tracker_lab: TrackerLab,  # noqa: F811
    tmp_path: Path,
) -> None:
    lab = tracker_lab
    # The flow's step is the agent's under a name of this test (its retry topic and
    # group are named after it); the tracker and the gateway do not read agent names.
    flow = (Path(__file__).parent / "flows" / "orders.v1.yaml").read_text()
    lab.add_flow("orders.v1.yaml", text=flow.replace("budget-agent", f"budget-{lab.suffix}"))
    lab.project.write_topology(
        TOPOLOGY.replace(
            "sagalog.v1.WorkflowCancelled", f"sagalog.v1.WorkflowCancelled, {REPLAYED}"
        )
    )
    lab.project.apply()
    lab.tracker()
    gw = GatewayLab(lab, tmp_path)
    gw.start_gateway(deadletter_topics=lab.deadletter_topic)
    agents = [start_agent(lab, tmp_path, broken=True)]
    try:
        _poison_fix_and_replay(gw, lab, agents, tmp_path)
    finally:
        for process in agents:
            process.kill()
        gw.close()


def _poison_fix_and_replay(
    gw: GatewayLab, lab: TrackerLab, agents: list[AgentProcess], tmp: Path
) -> None:
    workflow = f"wf-poison-{uuid.uuid4().hex[:6]}"
    began = time.monotonic()
    lab.start(workflow)
    lab.wait(
        lambda: any(t["step"] == "classify_request" for t in lab.transitions(workflow)),
        what=f"{workflow}: the agent reserved, classify_request running",
        timeout=120,
    )
    lab.fail(workflow, "classify_request", reason="classifier down")

    # The poison: the release is dead-lettered, and the workflow waits, compensating.
    lab.wait(
        lambda: any(d.get("ce_workflowid") == workflow for d in lab.seen.deadletters),
        what="the release request dead-lettered",
    )
    lab.wait(
        lambda: any(
            e["step"] == "reserve_budget" for e in lab.events(workflow, "sagalog.v1.StepFailed")
        ),
        what="the agent's StepFailed of the release",
    )
    assert lab.state(workflow) == "compensating"
    poisoned_s = time.monotonic() - began

    listed = cli(gw, "dlq", "list", "--agent", f"budget-{lab.suffix}", "--json")
    assert listed.returncode == 0, listed.stderr
    [letter] = [
        d for d in json.loads(listed.stdout)["dead_letters"] if d["workflow_id"] == workflow
    ]
    position = letter["position"]
    assert letter["event_type"] == RELEASE and letter["replays"] == []
    assert "the ledger call is built wrong" in letter["reason"]
    assert letter["origin"].startswith(f"{lab.topic}/")
    table = cli(gw, "dlq", "list")
    assert position in table.stdout and "CompensationRequested" in table.stdout, table.stdout

    shown = cli(gw, "dlq", "show", position)
    assert shown.returncode == 0, shown.stderr
    assert "NonRetryableError" in shown.stdout and '"step": "reserve_budget"' in shown.stdout
    assert "sagalog_dlq_attempts = " in shown.stdout and "stack" in shown.stdout

    _wrong_inputs_are_refused_with_what_to_do(gw, lab, position)

    # The fix: the agent restarts without the bug; the dead letter is replayed.
    assert agents[0].stop() == 0
    agents.append(start_agent(lab, tmp, broken=False))
    asked = time.monotonic()
    replay = cli(
        gw, "dlq", "replay", position, "--reason", "release call fixed", "--by", "ops@example.com"
    )
    assert replay.returncode == 0, replay.stderr
    assert f"replayed {position} (replay 1) of workflow {workflow}" in replay.stdout
    lab.wait_state(workflow, "compensated", timeout=120)
    finished_s = time.monotonic() - asked

    # The log: the audit event before the replay, the replay a new event naming the dead letter.
    [audited] = lab.events(workflow, REPLAYED)
    assert (audited["requested_by"], audited["reason"]) == ("ops@example.com", "release call fixed")
    assert audited["dead_letter"] == position and audited["replay"] == 1
    releases = lab.events(workflow, RELEASE)
    [replayed] = [e for e in releases if e["headers"].get(H_REPLAY_OF) == position]
    assert replayed["id"] == audited["replay_event_id"] != letter["event_id"]
    assert audited["at"] < replayed["at"]

    # The audit trail shows the replay and who asked for it.
    trail = _settled_trail(lab, workflow)
    text = trail.stdout
    assert "DeadLetterReplayed" in text and "ops@example.com" in text, text
    assert "release call fixed" in text and f"{H_REPLAY_OF}={position}" in text, text
    assert "verified: no modified, missing or reordered event" in text, text

    # Asked again: refused, nothing published; --again would replay it once more.
    before = gw.end_offsets()
    again = cli(gw, "dlq", "replay", position, "--reason", "twice", "--by", "ops@example.com")
    assert again.returncode == 2, again.stdout
    assert "replayed already" in again.stderr and "--again" in again.stderr, again.stderr
    assert gw.end_offsets() == before
    relisted = json.loads(cli(gw, "dlq", "list", "--json").stdout)["dead_letters"]
    [after] = [d for d in relisted if d["position"] == position]
    assert [r["event_id"] for r in after["replays"]] == [replayed["id"]]
    print(
        f"\npoisoned after {poisoned_s:.1f}s; compensated {finished_s:.1f}s after the replay "
        f"was asked; {len(lab.events(workflow))} events in the workflow's log"
    )


def _wrong_inputs_are_refused_with_what_to_do(
    gw: GatewayLab, lab: TrackerLab, position: str
) -> None:
    before = gw.end_offsets()
    malformed = cli(gw, "dlq", "show", "not-a-position")
    assert malformed.returncode == 2 and "not topic/partition/offset" in malformed.stderr
    refused: dict[str, Any] = {}
    for name, path in {
        "malformed": "/v1/dead-letters/deadletter/x/1/replay",
        "other topic": f"/v1/dead-letters/{lab.topic}/0/0/replay",
        "past the end": f"/v1/dead-letters/{lab.deadletter_topic}/0/99999/replay",
        "not a dead letter": f"/v1/dead-letters/{_plain_record(lab)}/replay",
    }.items():
        reply = gw.call("POST", path, {"reason": "r", "requested_by": "ops"})
        refused[name] = (reply.status, reply.body["error"])
    assert refused["malformed"][0] == 400 and "topic/partition/offset" in refused["malformed"][1]
    assert (
        refused["other topic"][0] == 400
        and "not in a dead-letter topic" in refused["other topic"][1]
    )
    assert refused["past the end"][0] == 404 and "dlq list" in refused["past the end"][1]
    assert refused["not a dead letter"][0] == 400
    assert "no dead-letter headers" in refused["not a dead letter"][1]
    unknown = cli(gw, "dlq", "replay", f"{lab.deadletter_topic}/0/99999", "--reason", "r")
    assert unknown.returncode == 2 and "gateway refused (404)" in unknown.stderr
    assert gw.end_offsets() == before  # nothing was published


def _plain_record(lab: TrackerLab) -> str:
    """A record in the dead-letter topic that no runtime dead-lettered; its position."""
    producer = Producer(lab.project.settings.producer_config())
    where: list[Any] = []
    producer.produce(
        lab.deadletter_topic, value=b"not a dead letter", on_delivery=lambda e, m: where.append(m)
    )
    producer.flush(10)
    [message] = where
    return f"{message.topic()}/{message.partition()}/{message.offset()}"


def _settled_trail(lab: TrackerLab, workflow: str) -> Any:
    """``sagalog audit`` once the tracker stored the workflow's end (its record is written
    after the transition is published)."""
    deadline = time.monotonic() + 60
    while True:
        result = lab.project.sagalog(
            "audit",
            workflow,
            "--tracker-app-id",
            lab.app_id,
            "--transitions-topic",
            lab.transitions_topic,
            "--no-gateway",
            "--verify",
        )
        assert result.exit_code == 0, result.output
        if "compensated" in result.stdout.split("\n", 3)[2] or time.monotonic() > deadline:
            return result
        time.sleep(0.5)
