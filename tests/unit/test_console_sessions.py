"""The console's sessions and CSRF tokens (``console.sessions``) and where a sign-in may
send a person on to (``console.paths``): pure, no server."""

from __future__ import annotations

import base64

import pytest

from sagalog.services.gateway.console import paths
from sagalog.services.gateway.console.sessions import SessionSigner
from sagalog.services.gateway.exceptions import BadCsrfToken, SignInRequired

SECRET = b"unit-test-gate-secret-32-bytes!!"
NOW = 1_800_000_000


def test_a_session_reads_back_until_it_expires() -> None:
    signer = SessionSigner(SECRET)
    token = signer.issue(who="ann@example.com", api_key=b"k1", now_s=NOW, lifetime_s=60)
    session = signer.read(token, now_s=NOW + 59)
    assert (session.who, session.key_id, session.expires_s) == (
        "ann@example.com",
        signer.key_id(b"k1"),
        NOW + 60,
    )
    with pytest.raises(SignInRequired, match="expired"):
        signer.read(token, now_s=NOW + 60)


@pytest.mark.parametrize("token", [None, "", "junk", "a.b", "x" * 50 + "." + "y" * 43])
def test_no_token_or_a_token_it_did_not_sign_asks_to_sign_in(token: str | None) -> None:
    with pytest.raises(SignInRequired):
        SessionSigner(SECRET).read(token, now_s=NOW)


def test_an_altered_token_or_another_secret_is_refused() -> None:
    signer = SessionSigner(SECRET)
    token = signer.issue(who="ann", api_key=b"k1", now_s=NOW, lifetime_s=60)
    mac = token.partition(".")[2]
    longer = signer.issue(who="ann", api_key=b"k1", now_s=NOW, lifetime_s=6000).partition(".")[0]
    with pytest.raises(SignInRequired, match="not signed by this gateway"):
        signer.read(f"{longer}.{mac}", now_s=NOW)  # a longer life, under the old signature
    with pytest.raises(SignInRequired, match="not signed by this gateway"):
        SessionSigner(b"another-secret-of-32-bytes-long!").read(token, now_s=NOW)


def test_the_key_itself_is_not_in_the_token() -> None:
    key = b"operator-key-that-must-not-leak"
    token = SessionSigner(SECRET).issue(who="ann", api_key=key, now_s=NOW, lifetime_s=60)
    body = token.partition(".")[0]
    assert key not in base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def test_the_csrf_token_is_the_sessions_own() -> None:
    signer = SessionSigner(SECRET)
    one = signer.read(signer.issue(who="a", api_key=b"k", now_s=NOW, lifetime_s=60), now_s=NOW)
    two = signer.read(signer.issue(who="a", api_key=b"k", now_s=NOW, lifetime_s=60), now_s=NOW)
    signer.check_csrf(one, signer.csrf_token(one))
    with pytest.raises(BadCsrfToken, match="without its CSRF token"):
        signer.check_csrf(one, None)
    with pytest.raises(BadCsrfToken, match="not this session's"):
        signer.check_csrf(one, signer.csrf_token(two))


def test_the_sign_in_form_token_fits_only_its_cookie() -> None:
    signer = SessionSigner(SECRET)
    nonce = signer.sign_in_nonce()
    signer.check_sign_in(nonce, signer.sign_in_token(nonce))
    for cookie, field in [(None, signer.sign_in_token(nonce)), (nonce, None), (nonce, "x")]:
        with pytest.raises(BadCsrfToken, match="sign-in form"):
            signer.check_sign_in(cookie, field)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (None, "/console"),
        ("/console/workflows?state=failed", "/console/workflows?state=failed"),
        ("/console", "/console"),
        ("https://evil.example/console", "/console"),
        ("//evil.example/console", "/console"),
        ("/v1/gates", "/console"),
        ("/consolex", "/console"),
        ("/\\evil.example", "/console"),
    ],
)
def test_after_signing_in_a_person_stays_in_the_console(target: str | None, expected: str) -> None:
    assert paths.local_target(target) == expected


def test_a_workflow_address_escapes_its_id() -> None:
    assert paths.workflow("a/b c?") == "/console/workflows/a%2Fb%20c%3F"
    assert paths.dead_letter("orders.dlq/0/7") == "/console/dead-letters/orders.dlq/0/7"
