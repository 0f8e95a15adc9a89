"""``sagalog dev kafka TOOL``: which class runs, with which arguments added."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from sagalog.devstack.credentials import ScramCredential
from sagalog.devstack.tools import admin_client_properties, tool_command
from sagalog.errors import ConfigurationError

CONFIG = Path("/state/security/admin-client.properties")


def _command(tool: str, *arguments: str, config: Path | None = CONFIG) -> list[str]:
    return tool_command(
        java=Path("/jdk/bin/java"),
        jar_dir=Path("/jars"),
        log4j_config=Path("/tools-log4j2.properties"),
        tool=tool,
        arguments=list(arguments),
        bootstrap_servers="127.0.0.1:9092,127.0.0.1:9192",
        command_config=config,
    )


def test_a_known_tool_gets_the_bootstrap_and_the_admin_config_after_its_arguments() -> None:
    command = _command("kafka-acls", "--list")
    assert command[:5] == [
        "/jdk/bin/java",
        "-Xmx256m",
        "-cp",
        "/jars/*",
        "-Dlog4j2.configurationFile=/tools-log4j2.properties",
    ]
    assert command[5:] == [
        "org.apache.kafka.tools.AclCommand",
        "--list",
        "--bootstrap-server",
        "127.0.0.1:9092,127.0.0.1:9192",
        "--command-config",
        str(CONFIG),
    ]


def test_what_the_user_gives_is_not_given_again() -> None:
    command = _command(
        "kafka-console-consumer.sh", "--bootstrap-server=127.0.0.1:1", "--topic", "t"
    )
    assert command.count("--bootstrap-server") == 0
    assert "--bootstrap-server=127.0.0.1:1" in command
    assert command[-2:] == ["--command-config", str(CONFIG)]
    assert "org.apache.kafka.tools.consumer.ConsoleConsumer" in command


def test_a_plaintext_stack_gets_no_command_config() -> None:
    command = _command("kafka-consumer-groups", "--list", config=None)
    assert "--command-config" not in command
    assert "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand" in command


def test_subcommand_tools_get_the_cluster_flags_first() -> None:
    command = _command("kafka-metadata-quorum", "describe", "--status")
    index = command.index("org.apache.kafka.tools.MetadataQuorumCommand")
    assert command[index + 1] == "--bootstrap-server"
    assert command[-2:] == ["describe", "--status"]


def test_a_main_class_runs_as_given() -> None:
    command = _command("org.apache.kafka.tools.TopicCommand", "--version")
    assert command[-2:] == ["org.apache.kafka.tools.TopicCommand", "--version"]


def test_an_unknown_tool_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="kafka-acls"):
        _command("kafka-acl")


def test_the_admin_config_logs_in_with_scram_over_tls() -> None:
    admin = ScramCredential(username="admin", password=SecretStr("pw"))
    assert admin_client_properties(admin=admin, ca_certificate=Path("/ca.pem")) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="pw";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
    }
