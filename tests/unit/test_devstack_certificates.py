"""The secure stack's CA and certificates, and its password files."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sagalog.devstack.certificates import CertificateAuthority
from sagalog.devstack.credentials import CredentialStore
from sagalog.errors import ConfigurationError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _chain(path: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(path.read_bytes())


def _verify(certificate: x509.Certificate, issuer: x509.Certificate) -> None:
    public_key = issuer.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    assert certificate.signature_hash_algorithm is not None
    public_key.verify(
        certificate.signature,
        certificate.tbs_certificate_bytes,
        ec.ECDSA(certificate.signature_hash_algorithm),
    )


def test_the_broker_certificate_is_signed_by_the_ca_with_loopback_sans(tmp_path: Path) -> None:
    authority = CertificateAuthority(tmp_path / "security")
    broker = authority.issue_broker_certificate()
    leaf, ca = _chain(broker.certificate)
    assert ca.subject == _chain(authority.ca_certificate)[0].subject
    _verify(leaf, ca)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca


def test_a_client_certificate_is_cn_name_and_client_auth_only(tmp_path: Path) -> None:
    authority = CertificateAuthority(tmp_path / "security")
    files = authority.issue_client_certificate("budget-agent")
    leaf, ca = _chain(files.certificate)
    _verify(leaf, ca)
    assert leaf.subject.rfc4514_string() == "CN=budget-agent"
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "budget-agent"
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    keystore = files.keystore.read_bytes()
    assert keystore.startswith(b"-----BEGIN PRIVATE KEY-----")
    assert keystore.count(b"BEGIN CERTIFICATE") == 2


def test_keys_are_0600_in_a_0700_directory_and_issued_once(tmp_path: Path) -> None:
    authority = CertificateAuthority(tmp_path / "security")
    files = authority.issue_client_certificate("budget-agent")
    for private in (files.key, files.keystore, tmp_path / "security" / "ca-key.pem"):
        assert _mode(private) == 0o600, private
    assert _mode(files.key.parent) == 0o700
    assert _mode(tmp_path / "security") == 0o700
    before = files.certificate.read_bytes()
    assert authority.issue_client_certificate("budget-agent").certificate.read_bytes() == before


def test_another_ca_does_not_sign_this_stacks_certificates(tmp_path: Path) -> None:
    ours = CertificateAuthority(tmp_path / "ours")
    theirs = CertificateAuthority(tmp_path / "theirs")
    leaf, _ = _chain(theirs.issue_client_certificate("budget-agent").certificate)
    ours.ensure()
    with pytest.raises(InvalidSignature):
        _verify(leaf, _chain(ours.ca_certificate)[0])


def test_principal_names_that_would_break_a_cn_or_a_file_name_are_refused(tmp_path: Path) -> None:
    authority = CertificateAuthority(tmp_path)
    for bad in ("", "../x", "a,b", "CN=x", "-flag", "x" * 65):
        with pytest.raises(ConfigurationError):
            authority.issue_client_certificate(bad)


def test_passwords_are_random_kept_0600_and_stable(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "passwords")
    admin = store.admin()
    other = store.credential("budget-agent")
    assert admin.username == "admin" and other.username == "budget-agent"
    assert admin.password.get_secret_value() != other.password.get_secret_value()
    assert len(admin.password.get_secret_value()) >= 40
    assert admin.password.get_secret_value() not in repr(admin)
    assert store.admin() == admin
    assert _mode(store.path("admin")) == 0o600
    assert _mode(tmp_path / "passwords") == 0o700
    assert store.existing("nobody") is None
    for character in ",=]\"' ":
        assert character not in admin.password.get_secret_value()
