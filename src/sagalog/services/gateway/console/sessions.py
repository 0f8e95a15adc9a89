"""Console sessions and CSRF tokens: signed with the standard library's HMAC, no table.

A person signs in once with an API key and gets a session cookie; the key itself is
never stored in the browser, nor in any URL. The cookie's value is a token the
gateway signed: who signed in (a name they gave, recorded with their actions), a
random session id, when it expires, and a *key id*: an HMAC of the key they used.
Nothing is kept on the server, so every gateway replica reads every session, and a
restart signs no one out. The key id is looked up among the keys configured now, on
every request: a key rotated out of ``GATEWAY_API_KEYS`` ends its sessions at once,
and a key moved to the read-only list takes its sessions with it.

The signing key is derived from the gateway's gate secret (``GATEWAY_GATE_SECRET``,
the same on every replica) with HMAC and a label of its own, so a session token can
never pass for a gate token or the reverse, and there is no second secret to deploy.

CSRF: every POST carries the session's CSRF token (a hidden field, or the
``X-CSRF-Token`` header htmx adds), an HMAC of the session id. Another site can make
the browser send the cookie (not with SameSite=Strict, but older browsers exist) and
cannot read the page, so it cannot know the token. The sign-in form has a token of
its own, tied to a short-lived cookie, so another site cannot sign a browser in
under a key of its choosing either.

The trade-off of a stateless token: signing out removes the cookie, but a copy of the
token taken before stays valid until it expires (``GATEWAY_CONSOLE_SESSION_S``, 8 h by
default). Rotating the key, or the gate secret, ends every session made with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from sagalog.services.gateway.exceptions import BadCsrfToken, SignInRequired

COOKIE = "sagalog_session"
SIGN_IN_COOKIE = "sagalog_sign_in"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SIGN_IN_FORM_S = 1800
"""How long a sign-in form may stay open before it must be loaded again."""

_LABEL = b"sagalog console session v1"


@dataclass(frozen=True)
class Session:
    """A signed-in browser."""

    session_id: str
    who: str
    key_id: str
    expires_s: int


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionSigner:
    """Issues and reads session tokens, and the CSRF tokens that go with them."""

    def __init__(self, secret: bytes) -> None:
        self._key = hmac.new(secret, _LABEL, hashlib.sha256).digest()

    def _mac(self, purpose: bytes, data: bytes) -> bytes:
        return hmac.new(self._key, purpose + b"\x00" + data, hashlib.sha256).digest()

    def key_id(self, api_key: bytes) -> str:
        """Names an API key without revealing it (a session carries this, not the key)."""
        return _b64(self._mac(b"key", api_key)[:16])

    def issue(self, *, who: str, api_key: bytes, now_s: int, lifetime_s: int) -> str:
        """A new session's token for the cookie."""
        payload = {
            "sid": secrets.token_urlsafe(16),
            "who": who,
            "kid": self.key_id(api_key),
            "exp": now_s + lifetime_s,
        }
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._mac(b'session', body.encode()))}"

    def read(self, token: str | None, *, now_s: int) -> Session:
        """The session ``token`` stands for.

        Raises:
            SignInRequired: no token, a token this gateway did not sign, or an expired one.
        """
        if not token:
            raise SignInRequired("sign in to use the console")
        body, _, mac = token.partition(".")
        try:
            genuine = hmac.compare_digest(_unb64(mac), self._mac(b"session", body.encode()))
            payload = json.loads(_unb64(body)) if genuine else None
        except (ValueError, binascii.Error):
            payload = None
        if not isinstance(payload, dict):
            raise SignInRequired(
                "the session cookie was not signed by this gateway (its gate secret changed, "
                "or the cookie was altered); sign in again"
            )
        if int(payload["exp"]) <= now_s:
            raise SignInRequired("the session expired; sign in again")
        return Session(
            session_id=str(payload["sid"]),
            who=str(payload["who"]),
            key_id=str(payload["kid"]),
            expires_s=int(payload["exp"]),
        )

    def csrf_token(self, session: Session) -> str:
        return _b64(self._mac(b"csrf", session.session_id.encode()))

    def check_csrf(self, session: Session, given: str | None) -> None:
        """Raises ``BadCsrfToken`` (403) unless ``given`` is the session's CSRF token."""
        if not given:
            raise BadCsrfToken(
                f"the form came without its CSRF token ({CSRF_FIELD}): nothing was done. "
                "Reload the page and submit the form from it"
            )
        if not hmac.compare_digest(given.encode(), self.csrf_token(session).encode()):
            raise BadCsrfToken(
                "the form's CSRF token is not this session's (it came from another page or "
                "an earlier sign-in): nothing was done. Reload the page and submit it again"
            )

    @staticmethod
    def sign_in_nonce() -> str:
        return secrets.token_urlsafe(16)

    def sign_in_token(self, nonce: str) -> str:
        """The sign-in form's token, tied to the nonce in its short-lived cookie."""
        return _b64(self._mac(b"sign-in", nonce.encode()))

    def check_sign_in(self, nonce: str | None, given: str | None) -> None:
        """Raises ``BadCsrfToken`` (403) unless the form's token fits the cookie's nonce."""
        if (
            not nonce
            or not given
            or not hmac.compare_digest(given.encode(), self.sign_in_token(nonce).encode())
        ):
            raise BadCsrfToken(
                "the sign-in form expired or did not come from this console: nothing was "
                "done. Open the sign-in page again and sign in from it"
            )
