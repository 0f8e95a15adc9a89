"""``client_environment``: the SAGALOG_* variables of a client of the dev stack."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from sagalog.devstack.certificates import CertificateFiles
from sagalog.devstack.credentials import ScramCredential
from sagalog.devstack.nodes import kafka_nodes
from sagalog.devstack.profile import (
    client_environment,
    export_lines,
    replication_profile,
    variable,
)
from sagalog.devstack.settings import DevStackSettings
from sagalog.devstack.shape import StackShape
from sagalog.settings import ClientSettings

URL = "http://127.0.0.1:8081/apis/ccompat/v7"
CA = Path("/state/security/ca.pem")
ADMIN = ScramCredential(username="admin", password=SecretStr("s3cret"))


def _nodes(brokers: int, secure: bool = False):  # type: ignore[no-untyped-def]
    return kafka_nodes(DevStackSettings(state_dir=Path("/state")), StackShape(brokers, secure))


def test_the_one_broker_stack_overrides_productions_3_2_with_1_1() -> None:
    assert replication_profile(1) == (1, 1)
    assert replication_profile(3) == (3, 2)
    assert client_environment(nodes=_nodes(1), secure=False, schema_registry_url=URL) == {
        "SAGALOG_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
        "SAGALOG_SCHEMA_REGISTRY_URL": URL,
        "SAGALOG_REPLICATION_FACTOR": "1",
        "SAGALOG_MIN_INSYNC_REPLICAS": "1",
    }


def test_three_brokers_are_all_in_the_bootstrap_list_with_3_2() -> None:
    environment = client_environment(nodes=_nodes(3), secure=False, schema_registry_url=URL)
    assert environment["SAGALOG_BOOTSTRAP_SERVERS"] == (
        "127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292"
    )
    assert environment["SAGALOG_REPLICATION_FACTOR"] == "3"
    assert environment["SAGALOG_MIN_INSYNC_REPLICAS"] == "2"


def test_the_secure_admin_connects_over_sasl_ssl() -> None:
    assert client_environment(
        nodes=_nodes(1, secure=True),
        secure=True,
        schema_registry_url=URL,
        ca_certificate=CA,
        scram=ADMIN,
        registry_login=ADMIN,
    ) == {
        "SAGALOG_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
        "SAGALOG_SCHEMA_REGISTRY_URL": URL,
        "SAGALOG_REPLICATION_FACTOR": "1",
        "SAGALOG_MIN_INSYNC_REPLICAS": "1",
        "SAGALOG_SECURITY_PROTOCOL": "SASL_SSL",
        "SAGALOG_SASL_MECHANISM": "SCRAM-SHA-512",
        "SAGALOG_SASL_USERNAME": "admin",
        "SAGALOG_SASL_PASSWORD": "s3cret",
        "SAGALOG_SSL_CA_LOCATION": str(CA),
        "SAGALOG_SCHEMA_REGISTRY_USERNAME": "admin",
        "SAGALOG_SCHEMA_REGISTRY_PASSWORD": "s3cret",
    }


def test_an_mtls_client_bootstraps_from_the_mtls_listeners_with_its_certificate() -> None:
    certificate = CertificateFiles(
        name="budget-agent",
        certificate=Path("/s/clients/budget-agent.pem"),
        key=Path("/s/clients/budget-agent-key.pem"),
        keystore=Path("/s/clients/budget-agent-keystore.pem"),
        ca=CA,
    )
    environment = client_environment(
        nodes=_nodes(3, secure=True),
        secure=True,
        schema_registry_url=URL,
        ca_certificate=CA,
        certificate=certificate,
    )
    assert environment == {
        "SAGALOG_BOOTSTRAP_SERVERS": "127.0.0.1:9102,127.0.0.1:9202,127.0.0.1:9302",
        "SAGALOG_SCHEMA_REGISTRY_URL": URL,
        "SAGALOG_REPLICATION_FACTOR": "3",
        "SAGALOG_MIN_INSYNC_REPLICAS": "2",
        "SAGALOG_SECURITY_PROTOCOL": "SSL",
        "SAGALOG_SSL_CA_LOCATION": str(CA),
        "SAGALOG_SSL_CERTIFICATE_LOCATION": "/s/clients/budget-agent.pem",
        "SAGALOG_SSL_KEY_LOCATION": "/s/clients/budget-agent-key.pem",
    }


def test_every_variable_is_one_client_settings_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = client_environment(
        nodes=_nodes(3, secure=True),
        secure=True,
        schema_registry_url=URL,
        ca_certificate=CA,
        scram=ADMIN,
        registry_login=ADMIN,
    )
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = ClientSettings(_env_file=None)  # type: ignore[call-arg]
    assert settings.bootstrap_servers == environment["SAGALOG_BOOTSTRAP_SERVERS"]
    assert settings.security_protocol == "SASL_SSL"
    assert (settings.replication_factor, settings.min_insync_replicas) == (3, 2)
    assert settings.sasl_password is not None
    assert settings.sasl_password.get_secret_value() == "s3cret"
    assert settings.schema_registry_username == "admin"


def test_a_secure_client_needs_exactly_one_way_to_log_in() -> None:
    with pytest.raises(ValueError):
        client_environment(
            nodes=_nodes(1, True), secure=True, schema_registry_url=URL, ca_certificate=CA
        )


def test_variables_are_named_after_client_settings_fields() -> None:
    assert variable("sasl_password") == "SAGALOG_SASL_PASSWORD"
    with pytest.raises(KeyError):
        variable("no_such_field")


def test_export_lines_quote_only_what_the_shell_needs() -> None:
    assert export_lines({"A": "127.0.0.1:9092", "B": "it's", "C": ""}) == [
        "export A=127.0.0.1:9092",
        "export B='it'\"'\"'s'",
        "export C=''",
    ]
