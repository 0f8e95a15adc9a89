"""A private Kafka broker with SASL/SCRAM and an authorizer, for the ACL tests.

**A stand-in until the secure dev stack (``sagalog dev up --secure``) exists.** It
starts one Kafka KRaft node (broker and controller) from the jars ``sagalog dev up``
already cached (``~/.cache/sagalog/kafka/<version>``), in a temporary directory, on
private ports (49192 for clients, 49193 for the controller), and stops it at the end.
It never touches the shared dev stack on 9092/9093.

What it enforces is what a production cluster with ACLs does:

- one ``SASL_PLAINTEXT`` listener with ``SCRAM-SHA-512`` (TLS is not needed to test
  authorization; the principal is ``User:<SCRAM user name>`` either way);
- ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: deny by default;
- ``super.users=User:admin`` (the principal ``topology apply`` runs as), seeded with
  ``kafka-storage format --add-scram`` so it can log in before any ACL or user exists.

The controller listener is PLAINTEXT on the loopback interface, so the node's own
broker-to-controller connection arrives as ``User:ANONYMOUS``, which is therefore a
super user too; no client can use that listener (controllers refuse client requests).

Run it by hand to experiment: ``python -m tests.integration.secure_broker`` prints
where it listens and where the admin password is, and stops on SIGINT or SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from sagalog.devstack.commands import new_cluster_id, render_properties
from sagalog.devstack.lockfile import bundled_dir, load_lock
from sagalog.settings import ClientSettings

KAFKA_PORT = int(os.environ.get("SAGALOG_TEST_SECURE_KAFKA_PORT", "49192"))
CONTROLLER_PORT = int(os.environ.get("SAGALOG_TEST_SECURE_CONTROLLER_PORT", "49193"))
ADMIN_USER = "admin"
MECHANISM = "SCRAM-SHA-512"
START_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class SecureBroker:
    """A running secured broker: where it listens and how to log in as the admin."""

    bootstrap_servers: str
    admin_password: str
    directory: Path

    def settings(self, username: str = ADMIN_USER, password: str | None = None) -> ClientSettings:
        """Client settings for ``username`` (the admin by default) on this broker."""
        return ClientSettings(
            bootstrap_servers=self.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=MECHANISM,
            sasl_username=username,
            sasl_password=password if password is not None else self.admin_password,
            connect_timeout_s=15,
            replication_factor=1,
            min_insync_replicas=1,
            schema_registry_url="http://127.0.0.1:1/unused",  # ACL tests use raw bytes
        )


def kafka_jar_dir() -> Path:
    """The cached classpath of the Kafka version the dev stack pins."""
    lock = load_lock()
    cache = Path(os.environ.get("SAGALOG_DEV_CACHE_DIR", Path.home() / ".cache" / "sagalog"))
    jars = cache / "kafka" / lock.kafka.version
    if not (jars / f"kafka_2.13-{lock.kafka.version}.jar").is_file():
        raise RuntimeError(
            f"no cached Kafka {lock.kafka.version} jars in {jars}: run `sagalog dev up` once "
            "(on private ports: SAGALOG_DEV_STATE_DIR=/tmp/acl-dev SAGALOG_DEV_KAFKA_PORT=49092 "
            "SAGALOG_DEV_CONTROLLER_PORT=49093 SAGALOG_DEV_REGISTRY_PORT=48081) to fetch them"
        )
    return jars


def server_properties(*, data_dir: Path, admin_password: str) -> dict[str, str]:
    listener = f"SASL_PLAINTEXT://127.0.0.1:{KAFKA_PORT}"
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN_USER}" password="{admin_password}";'
    )
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{CONTROLLER_PORT}",
        "listeners": f"{listener},CONTROLLER://127.0.0.1:{CONTROLLER_PORT}",
        "advertised.listeners": listener,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{ADMIN_USER};User:ANONYMOUS",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }


@contextlib.contextmanager
def secure_broker(*, heap: str = "512m") -> Iterator[SecureBroker]:
    """Start the broker, wait until the admin can log in, yield it, stop it."""
    jars = kafka_jar_dir()
    log4j = bundled_dir() / "log4j2.properties"
    directory = Path(tempfile.mkdtemp(prefix="sagalog-secure-broker-"))
    password = os.urandom(12).hex()
    properties = directory / "server.properties"
    properties.write_text(
        render_properties(
            server_properties(data_dir=directory / "data", admin_password=password),
            header="sagalog test fixture: a secured single-node broker (tests/integration)",
        )
    )
    java = shutil.which("java") or "java"
    classpath = ["-cp", str(jars / "*"), f"-Dlog4j2.configurationFile={log4j}"]
    subprocess.run(
        [
            java,
            *classpath,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            new_cluster_id(),
            "-c",
            str(properties),
            "--add-scram",
            f"{MECHANISM}=[name={ADMIN_USER},password={password}]",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    log = (directory / "kafka.log").open("wb")
    process = subprocess.Popen(
        [
            java,
            f"-Xmx{heap}",
            "-XX:+ExitOnOutOfMemoryError",
            f"-Dkafka.logs.dir={directory / 'logs'}",
            *classpath,
            "kafka.Kafka",
            str(properties),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    broker = SecureBroker(f"127.0.0.1:{KAFKA_PORT}", password, directory)
    try:
        _wait_ready(broker, process)
        yield broker
    finally:
        _stop(process)
        log.close()
        if os.environ.get("SAGALOG_TEST_KEEP_BROKER_DIR") != "1":
            shutil.rmtree(directory, ignore_errors=True)


def _wait_ready(broker: SecureBroker, process: subprocess.Popen[bytes]) -> None:
    """Ask the broker, as the admin, until it answers (never sleep for a fixed time)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _listening(KAFKA_PORT):  # before a client exists: it would log every refusal
        _check_alive(broker, process)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the secure test broker did not listen on {KAFKA_PORT}")
        time.sleep(0.2)
    admin = AdminClient(broker.settings().kafka_config())
    while True:
        _check_alive(broker, process)
        try:
            admin.list_topics(timeout=2)
            # The authorizer answers only once the metadata log is loaded.
            admin.describe_acls(_any_acl(), request_timeout=5).result(timeout=5)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _listening(port: int) -> bool:
    with contextlib.closing(socket.socket()) as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _check_alive(broker: SecureBroker, process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        tail = (broker.directory / "kafka.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the secure test broker exited ({process.returncode}):\n{tail}")


def _any_acl():  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _serve_until_stopped() -> None:
    """Run the broker until SIGINT or SIGTERM; the admin password goes to a 0600 file."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with secure_broker() as running:
        secret = running.directory / "admin.password"
        secret.touch(mode=0o600)
        secret.write_text(running.admin_password)
        print(f"bootstrap {running.bootstrap_servers}, SASL_PLAINTEXT, SCRAM-SHA-512, user admin")
        print(f"admin password in {secret}; SIGINT or SIGTERM stops the broker", flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    _serve_until_stopped()
