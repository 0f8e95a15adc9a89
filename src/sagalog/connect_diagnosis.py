"""Why a client could not reach the cluster, told from what librdkafka reported.

librdkafka retries forever and its API call fails with a generic
``_TRANSPORT``/``Broker transport failure`` or a timeout; the real cause arrives on
the side, in the error callback (``_AUTHENTICATION``, ``_SSL``, ``_TRANSPORT`` with
the TLS alert) or only in a log line (a plaintext client on a TLS listener: the
broker closes the connection during the first request). ``connect_admin`` records
both while it connects and asks ``diagnose`` what they mean, so a wrong password is
reported as one, with the principal and the address, and not as "Kafka did not
answer".
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagalog.errors import AuthenticationError
from sagalog.settings import ClientSettings

_ADDRESS = re.compile(r"(?:[a-z_]+://)?([^\s/:]+:\d+)/")
_PLAINTEXT_CLOSED = ("in state APIVERSION_QUERY", "Disconnected while requesting ApiVersion")
_CERTIFICATE_REFUSED = ("alert certificate unknown", "alert unknown ca", "alert bad certificate")
_SERVER_UNTRUSTED = "certificate verify failed"
#: ``FAIL [rdkafka#producer-1] `` (a log line), ``[thrd:...]: ``, ``ssl://host:port/bootstrap: ``.
_PREFIXES = re.compile(r"^([A-Z]+ \[rdkafka#[^\]]*\] )?(\[thrd:[^\]]*\]: )?(\S+/\S+: )?")
_FIX_LOCAL = 'for the local stack, `eval "$(sagalog dev env)"` sets them'


@dataclass(frozen=True)
class ClientReport:
    """One error (callback) or log line librdkafka produced while connecting.

    Attributes:
        code: the error's name (``_AUTHENTICATION``, ``_SSL``, ``_TRANSPORT``, ...) or
            ``LOG`` for a log line.
        text: its message, which starts with the broker it is about.
    """

    code: str
    text: str


def _address(report: ClientReport, settings: ClientSettings) -> str:
    found = _ADDRESS.search(report.text)
    return found.group(1) if found else settings.bootstrap_servers


def certificate_subject(path: str) -> str:
    """``CN=...`` of a PEM certificate, or a placeholder that names the file."""
    # Imported here: ``cryptography`` is only needed when a certificate is in play.
    from cryptography import x509

    try:
        certificate = x509.load_pem_x509_certificate(Path(path).read_bytes())
    except (OSError, ValueError):
        return f"<unreadable certificate {path}>"
    return certificate.subject.rfc4514_string()


def speaks_tls(address: str, *, timeout_s: float = 2.0) -> bool:
    """Whether the listener at ``host:port`` answers a TLS handshake.

    A plaintext client on a TLS listener, and a client of a proxy whose broker is
    down, see the same thing: the connection closed during the first request. Only
    the first is a setting to fix (exit 5, not restarted); the second is an outage
    to wait out (exit 3 at most, restarted): an agent restarted during a broker
    outage behind a proxy must not be told to use TLS. A handshake tells the two
    apart: a TLS listener answers it, even one that then wants a certificate.
    """
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only whether it speaks TLS, not whom to trust
    try:
        with (
            socket.create_connection((host, int(port)), timeout=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host or None),
        ):
            return True
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
        return False  # closed without a word of TLS
    except ssl.SSLError:
        return True  # a TLS alert: it speaks TLS, and refused something of ours
    except (OSError, ValueError):
        return False


def diagnose(
    settings: ClientSettings,
    reports: Sequence[ClientReport],
    *,
    tls_probe: Callable[[str], bool] = speaks_tls,
) -> AuthenticationError | None:
    """The authentication failure these reports show, or None (then: not reachable).

    Args:
        settings: the client's settings (protocol, user, certificate).
        reports: what librdkafka reported while connecting.
        tls_probe: whether a ``host:port`` answers TLS (``speaks_tls``): a closed
            plaintext connection means "use TLS" only if it does.

    Raises nothing: the caller decides what to raise when this finds nothing.
    """
    protocol = settings.security_protocol
    for report in reports:
        if report.code == "_AUTHENTICATION":
            user = settings.sasl_username or "(no SAGALOG_SASL_USERNAME)"
            return AuthenticationError(
                f"Kafka at {_address(report, settings)} refused the {settings.sasl_mechanism} "
                f"login of user {user!r} (principal User:{user}): the password is wrong or the "
                f"user does not exist ({_detail(report.text)}). Check "
                f"SAGALOG_SASL_USERNAME and SAGALOG_SASL_PASSWORD; a service's user is created "
                f"by `sagalog topology apply`; {_FIX_LOCAL}"
            )
    for report in reports:
        if any(alert in report.text for alert in _CERTIFICATE_REFUSED):
            if settings.ssl_certificate_location:
                subject = certificate_subject(settings.ssl_certificate_location)
                who = (
                    f"the client certificate {subject} "
                    f"({settings.ssl_certificate_location}, principal User:"
                    f"{subject.removeprefix('CN=').split(',')[0]})"
                )
            else:
                who = "a client without a certificate (SAGALOG_SSL_CERTIFICATE_LOCATION unset)"
            return AuthenticationError(
                f"Kafka at {_address(report, settings)} rejected {who} during the TLS "
                f"handshake: the listener requires a certificate signed by the cluster's CA "
                f"and does not trust this one ({_detail(report.text)}). Use a "
                f"certificate of the cluster's CA in SAGALOG_SSL_CERTIFICATE_LOCATION and "
                f"SAGALOG_SSL_KEY_LOCATION; for the local stack, `sagalog dev cert NAME` issues "
                f'one and `eval "$(sagalog dev env --principal NAME --mtls)"` uses it'
            )
        if _SERVER_UNTRUSTED in report.text:
            ca = settings.ssl_ca_location or "unset: the system's CAs"
            return AuthenticationError(
                f"the broker at {_address(report, settings)} presented a certificate that the "
                f"CA in SAGALOG_SSL_CA_LOCATION ({ca}) did not sign, so the client "
                f"({_principal(settings)}) did not log in. Point SAGALOG_SSL_CA_LOCATION at "
                f"the cluster's CA; {_FIX_LOCAL}"
            )
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        for report in reports:
            if any(marker in report.text for marker in _PLAINTEXT_CLOSED):
                if not tls_probe(_address(report, settings)):
                    continue  # closed, but not by TLS: a proxy or a broker going down
                return AuthenticationError(
                    f"Kafka at {_address(report, settings)} closed the connection of a "
                    f"{protocol} client ({_principal(settings)}) during its first request: "
                    f"the listener expects TLS (SSL or SASL_SSL) and lets no plaintext "
                    f"client in. Set SAGALOG_SECURITY_PROTOCOL=SASL_SSL with "
                    f"SAGALOG_SASL_USERNAME/SAGALOG_SASL_PASSWORD (or SSL with a client "
                    f"certificate) and SAGALOG_SSL_CA_LOCATION; {_FIX_LOCAL}"
                )
    return None


def _detail(text: str) -> str:
    """The message without librdkafka's thread and broker prefixes."""
    return _PREFIXES.sub("", text)


def _principal(settings: ClientSettings) -> str:
    """Who the client would have been, in the broker's words."""
    if settings.security_protocol.startswith("SASL") and settings.sasl_username:
        return f"principal User:{settings.sasl_username}"
    if settings.ssl_certificate_location:
        return f"certificate {certificate_subject(settings.ssl_certificate_location)}"
    return "principal User:ANONYMOUS"
