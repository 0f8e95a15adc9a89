"""Kafka's own command-line tools, run against the dev stack: ``sagalog dev kafka TOOL``.

The tools come with ``kafka-tools`` on the stack's pinned classpath; this module
only knows which class a tool name runs and which arguments point it at the stack:
``--bootstrap-server`` and, on the secure stack, ``--command-config`` with the
admin's SCRAM login (a generated 0600 file). Arguments the user gives win: a tool
already told ``--bootstrap-server`` is not told again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from sagalog.devstack.commands import SCRAM_LOGIN_MODULE, kafka_classpath_flags
from sagalog.devstack.credentials import SCRAM_MECHANISM, ScramCredential
from sagalog.errors import ConfigurationError

#: The scripts of Kafka's ``bin/`` that talk to a cluster, by the script's name.
#: Each takes ``--bootstrap-server`` and ``--command-config`` (Kafka 4.4).
TOOLS: Mapping[str, str] = {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
}
#: Tools whose cluster flags go before their sub-command (``kafka-metadata-quorum
#: --bootstrap-server X describe --status``; ``kafka-transactions`` after ``describe``
#: fails with "unrecognized arguments"); the others take them anywhere.
_FLAGS_FIRST = frozenset(
    {"kafka-metadata-quorum", "kafka-cluster", "kafka-features", "kafka-transactions"}
)


def tool_class(name: str) -> tuple[str, bool]:
    """The main class of ``name``, and whether it is a known cluster tool.

    ``name`` may also be a fully qualified class (``org.apache.kafka.tools.X``) of the
    classpath: it runs as given, without any cluster arguments added.

    Raises:
        ConfigurationError: neither a known tool nor a class name.
    """
    script = name.removesuffix(".sh")
    if script in TOOLS:
        return TOOLS[script], True
    if "." in name and name.split(".")[-1][:1].isupper():
        return name, False
    raise ConfigurationError(
        f"unknown Kafka tool {name!r}: use one of {', '.join(sorted(TOOLS))}, or a main "
        f"class such as org.apache.kafka.tools.TopicCommand"
    )


def _given(arguments: Sequence[str], flag: str) -> bool:
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in arguments)


def tool_command(
    *,
    java: Path,
    jar_dir: Path,
    log4j_config: Path,
    tool: str,
    arguments: Sequence[str],
    bootstrap_servers: str,
    command_config: Path | None,
) -> list[str]:
    """The ``java`` command line that runs ``tool`` against the stack."""
    main_class, known = tool_class(tool)
    added: list[str] = []
    if known and not _given(arguments, "--bootstrap-server"):
        added += ["--bootstrap-server", bootstrap_servers]
    if known and command_config is not None and not _given(arguments, "--command-config"):
        added += ["--command-config", str(command_config)]
    script = tool.removesuffix(".sh")
    ordered = [*added, *arguments] if script in _FLAGS_FIRST else [*arguments, *added]
    return [
        str(java),
        "-Xmx256m",
        *kafka_classpath_flags(jar_dir=jar_dir, log4j_config=log4j_config),
        main_class,
        *ordered,
    ]


def admin_client_properties(*, admin: ScramCredential, ca_certificate: Path) -> dict[str, str]:
    """A Java client's properties for the admin over SASL_SSL (``--command-config``)."""
    password = admin.password.get_secret_value()
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.jaas.config": (
            f'{SCRAM_LOGIN_MODULE} required username="{admin.username}" password="{password}";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_certificate),
    }
