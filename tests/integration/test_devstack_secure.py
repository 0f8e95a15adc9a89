"""The secure dev stack on the real JVMs: who gets in, who is refused, and why.

The run's one secure single-broker stack (``secure_stack``, ``tests/stacks.py``),
shared with the ACL tests. The
refusals run through the CLI (``sagalog topology plan``), as a user meets them:
exit code 5 and a message naming the principal and the address.
"""

from __future__ import annotations

import base64
import json
import stat
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from sagalog.cluster import connect_admin
from sagalog.devstack import LocalStack
from sagalog.devstack.certificates import CertificateAuthority
from stacks import cli_environment, client_settings, sagalog


@pytest.fixture
def secure(secure_stack: LocalStack) -> LocalStack:
    return secure_stack


def test_the_admin_gets_in_over_sasl_ssl(secure: LocalStack) -> None:
    environment = secure.client_environment()
    assert environment["SAGALOG_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert environment["SAGALOG_SASL_USERNAME"] == "admin"
    _, metadata = connect_admin(client_settings(environment))
    assert list(metadata.brokers) == [1]


def test_an_mtls_client_gets_in_with_a_certificate_of_the_stack(secure: LocalStack) -> None:
    environment = secure.client_environment(principal="budget-agent", mtls=True)
    assert environment["SAGALOG_SECURITY_PROTOCOL"] == "SSL"
    assert environment["SAGALOG_BOOTSTRAP_SERVERS"] == f"127.0.0.1:{secure.nodes[0].mtls_port}"
    _, metadata = connect_admin(client_settings(environment))
    assert metadata.brokers[1].port == secure.nodes[0].mtls_port


def test_a_plaintext_client_is_refused_with_exit_code_5(secure: LocalStack) -> None:
    env = cli_environment(secure, {"SAGALOG_BOOTSTRAP_SERVERS": secure.bootstrap_servers})
    plan = sagalog("topology", "plan", env=env)
    assert plan.returncode == 5, plan.stderr
    assert "PLAINTEXT client (principal User:ANONYMOUS)" in plan.stderr
    assert secure.bootstrap_servers in plan.stderr


def test_a_wrong_scram_password_is_refused_with_exit_code_5(secure: LocalStack) -> None:
    environment = secure.client_environment() | {"SAGALOG_SASL_PASSWORD": "not-the-password"}
    plan = sagalog("topology", "plan", env=cli_environment(secure, environment))
    assert plan.returncode == 5, plan.stderr
    assert "login of user 'admin' (principal User:admin)" in plan.stderr
    assert secure.bootstrap_servers in plan.stderr
    assert "not-the-password" not in plan.stderr


def test_a_certificate_of_another_ca_is_refused_with_exit_code_5(
    secure: LocalStack, tmp_path: Path
) -> None:
    foreign = CertificateAuthority(tmp_path / "other-ca").issue_client_certificate("budget-agent")
    environment = secure.client_environment(principal="budget-agent", mtls=True) | {
        "SAGALOG_SSL_CERTIFICATE_LOCATION": str(foreign.certificate),
        "SAGALOG_SSL_KEY_LOCATION": str(foreign.key),
    }
    plan = sagalog("topology", "plan", env=cli_environment(secure, environment))
    assert plan.returncode == 5, plan.stderr
    assert "client certificate CN=budget-agent" in plan.stderr
    assert f"127.0.0.1:{secure.nodes[0].mtls_port}" in plan.stderr


def test_the_console_consumer_reads_through_sagalog_dev_kafka(secure: LocalStack) -> None:
    settings = client_settings(secure.client_environment())
    admin, _ = connect_admin(settings)
    topic = f"devstack-console-{uuid.uuid4().hex[:8]}"
    env = cli_environment(secure)
    created = sagalog("dev", "kafka", "kafka-topics", "--create", "--topic", topic, env=env)
    assert created.returncode == 0, created.stderr
    producer = Producer(settings.producer_config())
    producer.produce(topic, key=b"k", value=b"hello from the secure stack")
    assert producer.flush(15) == 0
    consumed = sagalog(
        "dev",
        "kafka",
        "kafka-console-consumer",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "1",
        "--group",
        "devstack-console",
        env=env,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.strip() == "hello from the secure stack"
    groups = sagalog("dev", "kafka", "kafka-consumer-groups", "--list", env=env)
    assert groups.returncode == 0 and "devstack-console" in groups.stdout.split()
    granted = sagalog(
        "dev",
        "kafka",
        "kafka-acls",
        "--add",
        "--allow-principal",
        "User:budget-agent",
        "--operation",
        "Read",
        "--topic",
        topic,
        env=env,
    )
    assert granted.returncode == 0, granted.stderr
    listed = sagalog("dev", "kafka", "kafka-acls", "--list", "--topic", topic, env=env)
    assert "principal=User:budget-agent" in listed.stdout
    admin.delete_topics([topic])[topic].result(15)


def test_the_registry_wants_the_admin_login(secure: LocalStack) -> None:
    url = f"{secure.settings.schema_registry_url}/subjects"
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(url, timeout=10)
    assert anonymous.value.code == 401
    environment = secure.client_environment()
    login = f"{environment['SAGALOG_SCHEMA_REGISTRY_USERNAME']}:"
    login += environment["SAGALOG_SCHEMA_REGISTRY_PASSWORD"]
    request = urllib.request.Request(
        url, headers={"Authorization": "Basic " + base64.b64encode(login.encode()).decode()}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert isinstance(json.load(reply), list)


def test_status_answers_and_secrets_stay_out_of_logs(secure: LocalStack) -> None:
    env = cli_environment(secure)
    status = sagalog("dev", "status", "--json", env=env)
    assert status.returncode == 0, status.stdout
    assert json.loads(status.stdout)["secure"] is True
    password = secure.admin_credential().password.get_secret_value()
    assert password not in status.stdout
    for log in secure.layout.logs_dir.glob("*.log"):
        assert password not in log.read_text(errors="replace"), log
    for path in (secure.layout.passwords_dir / "admin", secure.layout.admin_client_properties):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(secure.layout.security_dir.stat().st_mode) == 0o700
    exports = sagalog("dev", "env", env=env)
    assert f"export SAGALOG_SASL_PASSWORD={password}" in exports.stdout
