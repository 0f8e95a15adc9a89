"""The whole reference system on a production-shaped cluster: ``dev up --brokers 3 --secure``.

Three KRaft brokers (replication 3, min ISR 2), TLS everywhere, SCRAM logins and the
StandardAuthorizer denying by default. ``make demo`` runs on it as a user would run it
(``sagalog dev run -- python -m demo``): the topology is applied with the ACLs it
derives and each service's SCRAM user, and then every service (tracker, gateway, the
nine agents of both reference workflows) connects as its own principal, so a right the
topology forgot fails the run. The requests and the filings end as planned, none is
stuck, both audit trails verify, and no service exits. The stack is the run's private
secure cluster (``secure_cluster``, ``tests/stacks.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sagalog.devstack import LocalStack
from stacks import REPO, cli_environment, sagalog

REQUESTS = 200
SERVICES = (
    "saga-tracker",
    "gateway",
    "intake-agent",
    "retrieval-agent",
    "risk-agent",
    "budget-agent",
    "purchasing-agent",
    "notification-agent",
    "records-agent",
    "drafting-agent",
    "submission-agent",
)


@pytest.mark.timeout(900)  # three minutes on a quiet machine; a bound for a loaded one
def test_the_reference_workflow_ends_as_planned_on_three_secure_brokers(
    secure_cluster: LocalStack, tmp_path: Path
) -> None:
    """About three minutes: ``make demo``'s 200 requests and 30 filings, end to end on
    three secure brokers (replication 3, min ISR 2), every service logged in as its
    own principal: the run itself is the check, and a shorter one would not cross
    the gate's escalation and deadline of the mix."""
    cluster = secure_cluster
    summary_file = tmp_path / "summary.json"
    env = cli_environment(cluster, {"PYTHONPATH": str(REPO / "services")})
    demo = subprocess.run(
        [
            str(Path(sys.executable).parent / "sagalog"),
            "dev",
            "run",
            "--",
            sys.executable,
            "-m",
            "demo",
            "--count",
            str(REQUESTS),
            "--summary",
            str(summary_file),
            "--run-dir",
            str(tmp_path / "run"),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output[-4000:]
    summary = json.loads(summary_file.read_text())
    assert summary["workflows"]["procurement"]["submitted"] == REQUESTS
    assert summary["workflows"]["filing"]["submitted"] > 0
    assert summary["stuck"] == 0, summary
    assert summary["matches_mix"], summary
    assert summary["audit_verified"], output[-4000:]
    assert summary["service_exits"] == {}, summary["service_exits"]
    assert summary["logins"] == "per service", summary.get("logins")
    # Requesters' addresses were sealed (the purchasing agent opened them for the ERP
    # under its derived READ on the key topic), and one requester was erased.
    assert summary["erased"] is not None and summary["erased"]["keys"] == 1, summary

    # No password of the stack is in any service's log (nor in the demo's own output),
    # and no librdkafka configuration warning: a newcomer reads both.
    passwords = [cluster.admin_credential().password.get_secret_value()] + [
        cluster.service_credential(name).password.get_secret_value() for name in SERVICES
    ]
    logs = sorted((tmp_path / "run").rglob("*.log"))
    assert len(logs) >= len(SERVICES), logs
    for log in logs:
        text = log.read_text(errors="replace")
        assert not [p for p in passwords if p in text], f"a password is in {log}"
        assert "CONFWARN" not in text, _first_line_with("CONFWARN", text, log.name)
    assert not [p for p in passwords if p in output], "a password is in the demo's output"
    assert "CONFWARN" not in output, _first_line_with("CONFWARN", output, "the demo's output")

    # The audit of one workflow of every plan, as a person would run it (as the admin).
    for workflow_id in summary["examples"].values():
        audit = sagalog(
            "audit",
            workflow_id,
            "--verify",
            "--tracker-app-id",
            summary["tracker_app_id"],
            env=_admin_env(cluster),
        )
        assert audit.returncode == 0, audit.stdout + audit.stderr

    # Every topic the run created lives on the cluster profile, internal ones included.
    describe = sagalog(
        "dev", "kafka", "kafka-topics", "--describe", env=cli_environment(cluster), timeout_s=180
    )
    assert describe.returncode == 0, describe.stderr
    for line in describe.stdout.splitlines():
        if line.startswith("Topic:") and "ReplicationFactor" in line:
            name = line.split()[1]
            assert "ReplicationFactor: 3" in line, line
            if not name.startswith("__"):
                assert "min.insync.replicas=2" in line, line


def _first_line_with(needle: str, text: str, where: str) -> str:
    line = next(line for line in text.splitlines() if needle in line)
    return f"{where}: {line}"


def _admin_env(cluster: LocalStack) -> dict[str, str]:
    return cli_environment(cluster, cluster.client_environment())
