"""The first touch, as a newcomer runs it: real processes, real broker, JSON out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from sagalog.settings import ClientSettings

from .project import Project

REQUEST = {
    "request_id": "r-42",
    "requester": "ana@example.com",
    "department": "it",
    "title": "Monitors",
    "description": "two monitors",
    "amount": 480,
    "currency": "EUR",
    "vendor": "Acme",
    "submitted_at": "2026-11-29T09:00:00Z",
}


def sagalog(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SAGALOG_PROJECT_DIR": str(project.root),
        "SAGALOG_BOOTSTRAP_SERVERS": project.settings.bootstrap_servers,
        "SAGALOG_SCHEMA_REGISTRY_URL": project.settings.schema_registry_url,
    }
    return subprocess.run(
        [sys.executable, "-m", "sagalog", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_publish_then_tail(project: Project) -> None:
    assert sagalog(project, "topology", "apply").returncode == 0
    topic = project.topic("procurement.events")
    published = sagalog(
        project,
        "publish",
        topic,
        "procurement.v1.RequestSubmitted",
        json.dumps(REQUEST),
        "--workflow-id",
        "wf-42",
    )
    assert published.returncode == 0, published.stderr
    landed = json.loads(published.stdout)
    assert landed["headers"]["ce_type"] == "procurement.v1.RequestSubmitted"
    assert landed["headers"]["ce_workflowid"] == "wf-42"

    tailed = sagalog(project, "tail", topic, "-n", "1", "--idle-timeout", "20")
    assert tailed.returncode == 0, tailed.stderr
    record = json.loads(tailed.stdout)
    assert record["payload"]["amount"] == "480.00"
    assert record["payload"]["priority"] == "NORMAL"
    assert record["headers"]["ce_id"] == landed["headers"]["ce_id"]
    assert (record["partition"], record["offset"]) == (landed["partition"], landed["offset"])


def test_bad_event_json_names_the_field(project: Project) -> None:
    assert sagalog(project, "topology", "apply").returncode == 0
    topic = project.topic("procurement.events")
    bad = sagalog(
        project,
        "publish",
        topic,
        "procurement.v1.RequestSubmitted",
        json.dumps({**REQUEST, "amount": "lots"}),
    )
    assert bad.returncode == 2
    assert "amount: 'lots' is not a decimal number" in bad.stderr
    assert "Traceback" not in bad.stderr
    broken = sagalog(project, "publish", topic, "procurement.v1.RequestSubmitted", "{oops")
    assert broken.returncode == 2 and "payload is not valid JSON" in broken.stderr
    unknown = sagalog(project, "publish", topic, "procurement.v1.Nope", "{}")
    assert unknown.returncode == 2 and "unknown event type 'procurement.v1.Nope'" in unknown.stderr
    unregistered = sagalog(
        project,
        "publish",
        topic,
        "sagalog.v1.StepFailed",
        json.dumps({"step": "s", "reason": "r", "error_class": "E", "attempts": 1}),
    )
    assert unregistered.returncode == 2
    assert "is not registered under subject" in unregistered.stderr
    assert "sagalog topology apply" in unregistered.stderr


def test_unreachable_broker_and_registry_fail_fast(project: Project) -> None:
    env_broker = {
        **os.environ,
        "SAGALOG_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "SAGALOG_CONNECT_TIMEOUT_S": "3",
        "SAGALOG_PROJECT_DIR": str(project.root),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sagalog", "topology", "plan"],
        capture_output=True,
        text=True,
        env=env_broker,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert "Kafka at 127.0.0.1:1 did not answer within 3s" in done.stderr
    assert time.monotonic() - started < 30

    env_registry = {
        **env_broker,
        "SAGALOG_BOOTSTRAP_SERVERS": project.settings.bootstrap_servers,
        "SAGALOG_SCHEMA_REGISTRY_URL": "http://127.0.0.1:1/apis/ccompat/v7",
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sagalog", "topology", "plan"],
        capture_output=True,
        text=True,
        env=env_registry,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "schema registry at http://127.0.0.1:1/apis/ccompat/v7 did not answer" in done.stderr
    assert time.monotonic() - started < 30


def test_settings_point_at_the_local_stack_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # the defaults, whatever stack this run was pointed at (`sagalog dev run` exports it)
    for name in ("SAGALOG_BOOTSTRAP_SERVERS", "SAGALOG_SCHEMA_REGISTRY_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = ClientSettings(_env_file=None)  # type: ignore[call-arg]
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert settings.schema_registry_url.endswith("/apis/ccompat/v7")
