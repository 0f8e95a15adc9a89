"""The embedded stack on the real JVMs: idempotent ``up``, ``status``, and a stop/start.

``up`` and ``status`` run against the stack the settings point at (``SAGALOG_DEV_*``,
default ports), starting it if needed, and leave it running: the other integration
tests share it, on several workers at once. The stop and start runs on a private
stack of its own (``plain_stack``, ``tests/stacks.py``), since stopping the shared one
would fail whatever test another worker runs meanwhile.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.cli.dev import dev
from sagalog.devstack import ComponentState, DevStackSettings, LocalStack, StartAction
from stacks import cli_environment


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    stack = LocalStack(DevStackSettings())
    stack.up()
    try:
        yield stack
    finally:
        stack.up()  # whatever a test did, the shared stack is left running


def dev_environment(stack: LocalStack) -> dict[str, str]:
    """What points ``sagalog dev`` at ``stack`` rather than the default one."""
    return {k: v for k, v in cli_environment(stack).items() if k.startswith("SAGALOG_DEV_")}


def _register(url: str, subject: str) -> int:
    schema = {"type": "record", "name": "Probe", "fields": [{"name": "id", "type": "string"}]}
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=json.dumps({"schema": json.dumps(schema)}).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return int(json.load(reply)["id"])


def _subjects(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/subjects", timeout=10) as reply:
        return list(json.load(reply))


def _delete_subject(url: str, subject: str) -> None:
    for suffix in ("", "?permanent=true"):
        request = urllib.request.Request(f"{url}/subjects/{subject}{suffix}", method="DELETE")
        with urllib.request.urlopen(request, timeout=10):
            pass


def test_up_twice_adopts_the_running_services(stack: LocalStack) -> None:
    first = stack.status()
    second = stack.up()
    assert second.kafka.action is StartAction.ALREADY_RUNNING
    assert second.registry.action is StartAction.ALREADY_RUNNING
    assert (second.kafka.pid, second.registry.pid) == (first.kafka.pid, first.registry.pid)
    assert second.bootstrap_servers == stack.settings.bootstrap_servers


def test_status_reports_both_components_running(stack: LocalStack) -> None:
    status = stack.status()
    assert status.healthy
    assert status.kafka.state is ComponentState.RUNNING
    assert status.kafka.version == stack.lock.kafka.version
    assert status.registry.version in {r.version for r in stack.lock.registries}
    assert status.kafka.pid is not None and status.registry.pid is not None


def test_cli_up_prints_the_exports_and_status_json_exits_zero(stack: LocalStack) -> None:
    runner = CliRunner()
    up = runner.invoke(dev, ["up"])
    assert up.exit_code == 0, up.output
    assert f"export SAGALOG_BOOTSTRAP_SERVERS={stack.settings.bootstrap_servers}" in up.stdout
    assert f"export SAGALOG_SCHEMA_REGISTRY_URL={stack.settings.schema_registry_url}" in up.stdout
    status = runner.invoke(dev, ["status", "--json"])
    assert status.exit_code == 0, status.output
    report = json.loads(status.stdout)
    assert report["healthy"] is True
    assert set(report["components"]) == {"kafka", "registry"}


def test_stop_and_start_keep_topics_and_schemas(plain_stack: LocalStack) -> None:
    stack = plain_stack
    settings = stack.settings
    name = f"devstack-probe-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(15)
    _register(settings.schema_registry_url, f"{name}-value")
    try:
        down = stack.down()
        assert down.registry.signal_name == "SIGTERM"  # both shut down cleanly
        assert down.kafka.signal_name == "SIGTERM"
        stopped = stack.status()
        assert not stopped.healthy
        assert stopped.kafka.state is ComponentState.STOPPED
        assert CliRunner().invoke(dev, ["status"], env=dev_environment(stack)).exit_code == 1

        again = stack.up()
        assert again.kafka.action is StartAction.STARTED
        assert again.registry.action is StartAction.STARTED
        admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
        assert name in admin.list_topics(timeout=15).topics
        assert f"{name}-value" in _subjects(settings.schema_registry_url)
    finally:
        stack.up()
        cleanup = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
        for future in cleanup.delete_topics([name]).values():
            future.result(15)  # wait: an admin client dropped at once may never send it
        _delete_subject(settings.schema_registry_url, f"{name}-value")
