"""One set of connection settings for every client of every service.

``SAGALOG_*`` reaches every service's settings class; a service's own prefix wins
field by field; and every client family (librdkafka, aiokafka through faust, the
registry client) is built from the result by ``sagalog.client_config``.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import faust
import pytest

# The reference agents build their settings when imported; the purchasing agent's
# refuse to exist without the gate secret it verifies approvals with.
GATE_SECRET = "unit-test-gate-secret-0123456789"
os.environ.setdefault("PURCHASING_AGENT_GATE_SECRET", GATE_SECRET)
from budget_agent.agent import BudgetAgentSettings  # noqa: E402
from intake_agent.agent import IntakeAgentSettings  # noqa: E402
from notification_agent.agent import NotificationAgentSettings  # noqa: E402
from purchasing_agent.agent import PurchasingAgentSettings  # noqa: E402
from retrieval_agent.agent import RetrievalAgentSettings  # noqa: E402
from risk_agent.agent import RiskAgentSettings  # noqa: E402
from sagalog import client_config  # noqa: E402
from sagalog.agents.settings import AgentSettings  # noqa: E402
from sagalog.services.gateway.settings import GatewaySettings  # noqa: E402
from sagalog.services.tracker.settings import TrackerSettings  # noqa: E402
from sagalog.settings import ClientSettings  # noqa: E402

SERVICES: dict[str, tuple[type[ClientSettings], str]] = {
    "tracker": (TrackerSettings, "SAGALOG_TRACKER_"),
    "gateway": (GatewaySettings, "GATEWAY_"),
    "agent runtime": (AgentSettings, "SAGALOG_AGENT_"),
    "intake-agent": (IntakeAgentSettings, "INTAKE_AGENT_"),
    "retrieval-agent": (RetrievalAgentSettings, "RETRIEVAL_AGENT_"),
    "risk-agent": (RiskAgentSettings, "RISK_AGENT_"),
    "budget-agent": (BudgetAgentSettings, "BUDGET_AGENT_"),
    "purchasing-agent": (PurchasingAgentSettings, "PURCHASING_AGENT_"),
    "notification-agent": (NotificationAgentSettings, "NOTIFICATION_AGENT_"),
}

SHARED = {
    "SAGALOG_BOOTSTRAP_SERVERS": "broker-1:9093,broker-2:9093",
    "SAGALOG_SCHEMA_REGISTRY_URL": "https://registry.example:8081/apis/ccompat/v7",
    "SAGALOG_SECURITY_PROTOCOL": "SASL_SSL",
    "SAGALOG_SASL_MECHANISM": "SCRAM-SHA-512",
    "SAGALOG_SASL_USERNAME": "shared-user",
    "SAGALOG_SASL_PASSWORD": "shared-secret",
    "SAGALOG_SSL_CA_LOCATION": "/etc/sagalog/ca.pem",
    "SAGALOG_REPLICATION_FACTOR": "5",
    "SAGALOG_MIN_INSYNC_REPLICAS": "3",
    "SAGALOG_CONNECT_TIMEOUT_S": "4",
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No SAGALOG_* or service variable from the caller's shell, and no stray .env."""
    prefixes = ("SAGALOG_", *(prefix for _, prefix in SERVICES.values()))
    for name in list(os.environ):
        if name.startswith(prefixes):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PURCHASING_AGENT_GATE_SECRET", GATE_SECRET)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_the_shared_connection_reaches_every_service(
    service: str, clean_env: pytest.MonkeyPatch
) -> None:
    cls, _ = SERVICES[service]
    for name, value in SHARED.items():
        clean_env.setenv(name, value)
    settings = cls()
    assert settings.bootstrap_servers == "broker-1:9093,broker-2:9093"
    assert settings.security_protocol == "SASL_SSL"
    assert settings.sasl_username == "shared-user"
    assert settings.sasl_password is not None
    assert settings.sasl_password.get_secret_value() == "shared-secret"
    assert settings.replication_factor == 5
    assert settings.min_insync_replicas == 3
    assert settings.connect_timeout_s == 4
    config = settings.kafka_config()
    assert config["bootstrap.servers"] == "broker-1:9093,broker-2:9093"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["ssl.ca.location"] == "/etc/sagalog/ca.pem"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_the_service_prefix_wins_field_by_field(
    service: str, clean_env: pytest.MonkeyPatch
) -> None:
    cls, prefix = SERVICES[service]
    for name, value in SHARED.items():
        clean_env.setenv(name, value)
    clean_env.setenv(f"{prefix}SASL_USERNAME", f"{service}-user")
    clean_env.setenv(f"{prefix}BOOTSTRAP_SERVERS", "own-broker:9093")
    settings = cls()
    assert settings.sasl_username == f"{service}-user"
    assert settings.bootstrap_servers == "own-broker:9093"
    # the fields the service did not set still come from SAGALOG_*
    assert settings.security_protocol == "SASL_SSL"
    assert settings.sasl_password is not None
    assert settings.sasl_password.get_secret_value() == "shared-secret"


def test_a_service_agent_inherits_the_runtime_prefix_between_its_own_and_the_shared(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("SAGALOG_AGENT_MAX_ATTEMPTS", "9")
    clean_env.setenv("SAGALOG_AGENT_BOOTSTRAP_SERVERS", "agents:9092")
    clean_env.setenv("SAGALOG_BOOTSTRAP_SERVERS", "everyone:9092")
    assert BudgetAgentSettings().max_attempts == 9
    assert BudgetAgentSettings().bootstrap_servers == "agents:9092"
    clean_env.setenv("BUDGET_AGENT_MAX_ATTEMPTS", "2")
    assert BudgetAgentSettings().max_attempts == 2
    assert TrackerSettings().bootstrap_servers == "everyone:9092"


def test_a_shared_prefix_never_reaches_a_field_the_shared_class_does_not_declare(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("SAGALOG_APP_ID", "not-the-tracker")
    clean_env.setenv("SAGALOG_DATA_DIR", "/nowhere")
    assert TrackerSettings().app_id == "saga-tracker"
    assert GatewaySettings().data_dir == Path("./data/gateway")


def test_the_dotenv_file_layers_the_same_way(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "SAGALOG_BOOTSTRAP_SERVERS=from-dotenv:9092\nGATEWAY_SASL_USERNAME=gw\n"
    )
    assert TrackerSettings().bootstrap_servers == "from-dotenv:9092"
    assert GatewaySettings().bootstrap_servers == "from-dotenv:9092"
    assert GatewaySettings().sasl_username == "gw"
    # the environment is more specific than nothing, and the service's prefix than both
    clean_env.setenv("SAGALOG_TRACKER_BOOTSTRAP_SERVERS", "tracker-env:9092")
    assert TrackerSettings().bootstrap_servers == "tracker-env:9092"


def test_the_production_profile_is_the_default(clean_env: pytest.MonkeyPatch) -> None:
    settings = ClientSettings()
    assert (settings.replication_factor, settings.min_insync_replicas) == (3, 2)


def test_every_producer_is_acks_all_and_idempotent() -> None:
    config = ClientSettings().producer_config(**{"linger.ms": 5})
    assert config["acks"] == "all"
    assert config["enable.idempotence"] is True
    assert config["linger.ms"] == 5


def test_mtls_settings_reach_librdkafka_and_the_registry() -> None:
    settings = ClientSettings(
        security_protocol="SSL",
        ssl_ca_location="/ca.pem",
        ssl_certificate_location="/svc.pem",
        ssl_key_location="/svc.key",
        schema_registry_url="https://registry:8081/apis/ccompat/v7",
    )
    config = settings.kafka_config()
    assert config["security.protocol"] == "SSL"
    assert config["ssl.certificate.location"] == "/svc.pem"
    assert config["ssl.key.location"] == "/svc.key"
    registry = settings.registry_config()
    assert registry["ssl.ca.location"] == "/ca.pem"
    assert registry["ssl.certificate.location"] == "/svc.pem"


def test_a_plain_registry_gets_no_tls_files() -> None:
    registry = ClientSettings(ssl_ca_location="/ca.pem").registry_config()
    assert "ssl.ca.location" not in registry


def test_faust_gets_the_same_sasl_principal_over_tls(tmp_path: Path) -> None:
    ca = _self_signed_ca(tmp_path)
    settings = TrackerSettings(
        bootstrap_servers="a:1,b:2",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="saga-tracker",
        sasl_password="pw",
        ssl_ca_location=str(ca),
    )
    assert client_config.faust_broker(settings) == "kafka://a:1;kafka://b:2"
    credentials = client_config.faust_credentials(settings)
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.username == "saga-tracker"
    assert credentials.password == "pw"
    assert credentials.mechanism.value == "SCRAM-SHA-512"
    assert credentials.protocol.value == "SASL_SSL"
    assert isinstance(credentials.ssl_context, ssl.SSLContext)
    assert credentials.ssl_context.check_hostname


def test_faust_without_security_gets_no_credentials() -> None:
    assert client_config.faust_credentials(TrackerSettings()) is None


def test_faust_sasl_without_tls_is_sasl_plaintext() -> None:
    settings = TrackerSettings(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", sasl_username="t"
    )
    credentials = client_config.faust_credentials(settings)
    assert credentials.protocol.value == "SASL_PLAINTEXT"
    assert credentials.ssl_context is None


def test_the_environment_round_trips_through_any_service(clean_env: pytest.MonkeyPatch) -> None:
    source = ClientSettings(
        bootstrap_servers="x:1",
        security_protocol="SASL_SSL",
        sasl_username="u",
        sasl_password="secret",
        replication_factor=1,
        min_insync_replicas=1,
    )
    for name, value in client_config.environment(source).items():
        clean_env.setenv(name, value)
    for cls, _ in SERVICES.values():
        settings = cls()
        assert settings.kafka_config() == source.kafka_config()
        assert settings.replication_factor == 1


def test_the_principal_named_in_errors_is_never_a_secret() -> None:
    settings = ClientSettings(security_protocol="SASL_SSL", sasl_username="u", sasl_password="pw")
    assert client_config.principal(settings) == "User:u"
    assert "pw" not in client_config.principal(settings)
    assert client_config.principal(ClientSettings()) == "User:ANONYMOUS"


def _self_signed_ca(tmp_path: Path) -> Path:
    """A CA certificate for ``ssl.create_default_context(cafile=...)`` to load."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = tmp_path / "ca.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path
