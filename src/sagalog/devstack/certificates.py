"""The secure stack's own certificate authority, broker certificate and client certificates.

Generated locally with ``cryptography`` on the first secure ``up`` (no keytool, no
OpenSSL command line), kept in the state directory, and written as PEM: Kafka reads
PEM key stores (``ssl.keystore.type=PEM``) and librdkafka reads PEM files, so one
format serves the brokers, the Kafka CLIs and every Python client.

Keys are EC P-256: a key is made in a millisecond (RSA 2048 takes ~50 ms and more on a
busy CI machine) and both the JVM and OpenSSL speak it. Every private key file is
mode 0600 in a 0700 directory.

A certificate's subject is only ``CN=<name>``, and the brokers map ``CN=<name>`` to the
principal ``User:<name>``: a service's certificate and its SCRAM user are one principal,
so one set of ACLs covers both ways of connecting.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sagalog.devstack.layout import LOOPBACK
from sagalog.errors import ConfigurationError

#: The principal (and certificate CN) of the brokers themselves: a super user.
BROKER_PRINCIPAL = "kafka-broker"
CA_NAME = "sagalog dev stack CA"
#: Long enough that a developer's stack never sees one expire; it is a local CA.
VALIDITY = datetime.timedelta(days=3650)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_principal_name(name: str) -> str:
    """A principal name that is safe as a CN, a SCRAM user and a file name.

    Raises:
        ConfigurationError: anything but letters, digits, ``.``, ``_`` and ``-``.
    """
    if not _NAME.match(name):
        raise ConfigurationError(
            f"{name!r} is not a principal name: use 1-64 letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit (e.g. budget-agent)"
        )
    return name


@dataclass(frozen=True)
class CertificateFiles:
    """Where one issued certificate lives.

    Attributes:
        name: the principal (the certificate's CN).
        certificate: PEM certificate, followed by the CA certificate (the chain).
        key: PEM private key (PKCS#8, unencrypted, mode 0600).
        keystore: key and chain in one file, as Kafka's PEM key store wants them.
        ca: PEM certificate of the CA that signed it (the trust store).
    """

    name: str
    certificate: Path
    key: Path
    keystore: Path
    ca: Path


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the start (never world-readable, even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.parent.chmod(0o700)
    partial = path.with_name(f".{path.name}.partial")
    partial.unlink(missing_ok=True)
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)
    partial.replace(path)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_certificate(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


class CertificateAuthority:
    """The stack's CA in ``directory``: created on first use, then only read.

    Example:
        >>> ca = CertificateAuthority(Path("/tmp/stack/security"))   # doctest: +SKIP
        >>> ca.issue_client_certificate("budget-agent").certificate  # doctest: +SKIP
        PosixPath('/tmp/stack/security/clients/budget-agent.pem')
    """

    def __init__(self, directory: Path, *, now: datetime.datetime | None = None) -> None:
        self.directory = directory
        self._now = now

    @property
    def ca_certificate(self) -> Path:
        """The trust store of every client and broker of this stack."""
        return self.directory / "ca.pem"

    @property
    def _ca_key(self) -> Path:
        return self.directory / "ca-key.pem"

    def _clock(self) -> datetime.datetime:
        return self._now or datetime.datetime.now(datetime.UTC)

    def ensure(self) -> None:
        """Create the CA key and self-signed certificate unless they exist."""
        if self.ca_certificate.is_file() and self._ca_key.is_file():
            return
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
        now = self._clock()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        write_private(self._ca_key, _pem_key(key))
        self.ca_certificate.write_bytes(_pem_certificate(certificate))

    def _load(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        self.ensure()
        certificate = x509.load_pem_x509_certificate(self.ca_certificate.read_bytes())
        key = serialization.load_pem_private_key(self._ca_key.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigurationError(f"{self._ca_key} is not the EC key this stack made")
        return certificate, key

    def files(self, name: str) -> CertificateFiles:
        """Where the certificate of ``name`` is (or would be) kept."""
        folder = self.directory / "clients"
        return CertificateFiles(
            name=name,
            certificate=folder / f"{name}.pem",
            key=folder / f"{name}-key.pem",
            keystore=folder / f"{name}-keystore.pem",
            ca=self.ca_certificate,
        )

    def issue_broker_certificate(self, hosts: Sequence[str] = ()) -> CertificateFiles:
        """The brokers' certificate: a server (SANs 127.0.0.1, localhost and ``hosts``)
        and a client.

        The brokers present it to clients, and to each other and to the controllers
        (mTLS), where it maps to the super user ``User:kafka-broker``. ``hosts`` are
        the addresses of brokers that do not listen on loopback (the chaos suite's,
        each in its own network namespace): clients check the address they dialled.
        """
        return self._issue(BROKER_PRINCIPAL, server=True, hosts=hosts)

    def issue_client_certificate(self, name: str) -> CertificateFiles:
        """A client certificate for principal ``name`` (``User:<name>`` on the brokers).

        Issued once and then reused, so a running service's files never change under it.
        """
        return self._issue(check_principal_name(name), server=False)

    def _issue(self, name: str, *, server: bool, hosts: Sequence[str] = ()) -> CertificateFiles:
        files = self.files(name)
        if files.certificate.is_file() and files.key.is_file() and files.keystore.is_file():
            return files
        ca_certificate, ca_key = self._load()
        key = ec.generate_private_key(ec.SECP256R1())
        now = self._clock()
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.IPAddress(ipaddress.ip_address(LOOPBACK)),
                        x509.DNSName("localhost"),
                        *(
                            x509.IPAddress(ipaddress.ip_address(host))
                            for host in hosts
                            if host != LOOPBACK
                        ),
                    ]
                ),
                critical=False,
            )
        certificate = builder.sign(ca_key, hashes.SHA256())
        chain = _pem_certificate(certificate) + _pem_certificate(ca_certificate)
        write_private(files.key, _pem_key(key))
        write_private(files.keystore, _pem_key(key) + chain)
        files.certificate.write_bytes(chain)
        return files
