"""What librdkafka's side reports mean, as the messages recorded on the real broker show.

The texts below are what librdkafka 2.x reported against the secure dev stack (Kafka 4.4)
for each case; the integration test ``test_devstack_secure`` runs the same cases live.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sagalog.connect_diagnosis import ClientReport, diagnose, speaks_tls
from sagalog.devstack.certificates import CertificateAuthority
from sagalog.settings import ClientSettings

DOWN = ClientReport("_ALL_BROKERS_DOWN", "1/1 brokers are down")


def _settings(**fields: object) -> ClientSettings:
    return ClientSettings(_env_file=None, **fields)  # type: ignore[call-arg]


def test_a_wrong_scram_password_names_the_user_and_address() -> None:
    settings = _settings(
        bootstrap_servers="127.0.0.1:9092",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="budget-agent",
        sasl_password="hunter2-not-it",
    )
    report = ClientReport(
        "_AUTHENTICATION",
        "sasl_ssl://127.0.0.1:9092/bootstrap: SASL authentication error: Authentication failed "
        "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
        "(after 312ms in state AUTH_REQ)",
    )
    error = diagnose(settings, [DOWN, report])
    assert error is not None and error.exit_code == 5
    message = str(error)
    assert "User:budget-agent" in message and "127.0.0.1:9092" in message
    assert "SAGALOG_SASL_PASSWORD" in message and "sagalog dev env" in message
    assert "hunter2-not-it" not in message


def test_a_plaintext_client_on_a_tls_listener_is_told_to_use_tls() -> None:
    report = ClientReport(
        "LOG",
        "[thrd:127.0.0.1:9092/bootstrap]: 127.0.0.1:9092/bootstrap: Disconnected: connection "
        "closed by peer: receive 0 after POLLIN (after 4ms in state APIVERSION_QUERY)",
    )
    settings = _settings(bootstrap_servers="127.0.0.1:9092")
    error = diagnose(
        settings, [DOWN, report], tls_probe=lambda address: address == "127.0.0.1:9092"
    )
    assert error is not None
    assert "PLAINTEXT client (principal User:ANONYMOUS)" in str(error)
    assert "SAGALOG_SECURITY_PROTOCOL=SASL_SSL" in str(error)
    # The same close from a listener that does not speak TLS (a proxy whose broker is
    # down): an outage to wait out, not a setting to fix.
    assert diagnose(settings, [DOWN, report], tls_probe=lambda address: False) is None


def test_a_tls_listener_answers_the_probe_and_one_that_just_closes_does_not(
    tmp_path: Path,
) -> None:
    authority = CertificateAuthority(tmp_path)
    server_files = authority.issue_broker_certificate()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server_files.certificate, server_files.key)
    with _listener(lambda conn: context.wrap_socket(conn, server_side=True)) as tls_port:
        assert speaks_tls(f"127.0.0.1:{tls_port}")
    with _listener(lambda conn: conn) as closing_port:  # accepts, then closes at once
        assert not speaks_tls(f"127.0.0.1:{closing_port}")
    assert not speaks_tls(f"127.0.0.1:{closing_port}")  # nobody listens any more


@contextlib.contextmanager
def _listener(serve: Callable[[socket.socket], Any]) -> Iterator[int]:
    """A loopback listener that handles one connection with ``serve`` and closes it."""
    server = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        conn, _ = server.accept()
        with contextlib.suppress(OSError, ssl.SSLError):
            serve(conn).close()
        conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        thread.join(timeout=10)
        server.close()


def test_a_certificate_of_another_ca_names_its_subject(tmp_path: Path) -> None:
    files = CertificateAuthority(tmp_path).issue_client_certificate("budget-agent")
    settings = _settings(
        bootstrap_servers="127.0.0.1:9102",
        security_protocol="SSL",
        ssl_certificate_location=str(files.certificate),
        ssl_key_location=str(files.key),
    )
    report = ClientReport(
        "_TRANSPORT",
        "ssl://127.0.0.1:9102/bootstrap: Receive failed: error:0A000416:SSL routines::ssl/tls "
        "alert certificate unknown: SSL alert number 46 (after 0ms in state APIVERSION_QUERY)",
    )
    error = diagnose(settings, [report])
    assert error is not None
    assert "CN=budget-agent" in str(error) and "User:budget-agent" in str(error)
    assert "127.0.0.1:9102" in str(error) and "sagalog dev cert" in str(error)
    assert "(Receive failed: " in str(error)
    logged = ClientReport(
        "LOG", "FAIL [rdkafka#producer-1] [thrd:ssl://127.0.0.1:9102/bootstrap]: " + report.text
    )
    assert "(Receive failed: " in str(diagnose(settings, [logged]))


def test_a_broker_certificate_the_client_does_not_trust_names_the_ca_setting() -> None:
    report = ClientReport(
        "_SSL",
        "sasl_ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: error:0A000086:SSL "
        "routines::certificate verify failed: broker certificate could not be verified",
    )
    settings = _settings(
        security_protocol="SASL_SSL", sasl_username="admin", ssl_ca_location="/other/ca.pem"
    )
    error = diagnose(settings, [report])
    assert error is not None
    assert "/other/ca.pem" in str(error) and "User:admin" in str(error)


@pytest.mark.parametrize(
    "report",
    [
        DOWN,
        ClientReport(
            "_TRANSPORT",
            "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection "
            "refused (after 0ms in state CONNECT)",
        ),
    ],
)
def test_a_broker_that_is_down_is_not_an_authentication_failure(report: ClientReport) -> None:
    assert diagnose(_settings(), [report]) is None
