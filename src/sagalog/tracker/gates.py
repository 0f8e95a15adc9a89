"""Resumption tokens of human gates: HMAC-SHA256 bound to workflow, gate and attempt.

A ``GateOpened`` hands the assignee a token; a ``GateDecided`` resumes the workflow
only if it carries the token of *this* opening of *this* gate of *this* workflow. The
token is a MAC, not a secret lookup: the tracker keeps no token table, it recomputes
the token from the record and compares in constant time (``hmac.compare_digest``), so
a forged token tells an attacker nothing about how close it came.

Escalation keeps the attempt and so the token: the person first asked may still
decide after the gate has gone up the chain. A new opening of the gate would get a
new attempt, and the old token would no longer verify (expired).

The message is a JSON array ``[workflow_id, gate, attempt]`` behind a fixed context
string: unambiguous whatever characters the workflow id holds, and never valid as a
MAC for any other purpose the secret might serve. The ``g1.`` prefix names this
scheme so a later one can be told apart.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from pydantic import SecretStr

from sagalog.tracker.exceptions import GateSecretError

TOKEN_PREFIX = "g1."
MIN_SECRET_BYTES = 16
_CONTEXT = b"sagalog.gate-token.v1\x00"


def gate_token(secret: bytes, workflow_id: str, gate: str, attempt: int) -> str:
    """The resumption token of ``gate``'s opening number ``attempt`` in ``workflow_id``.

    URL-safe (base64url without padding), so it fits in a link a person clicks.

    Raises:
        GateSecretError: when ``secret`` is shorter than 16 bytes.
    """
    checked_secret(secret)
    message = json.dumps([workflow_id, gate, attempt], separators=(",", ":"), ensure_ascii=False)
    digest = hmac.new(secret, _CONTEXT + message.encode("utf-8"), hashlib.sha256).digest()
    return TOKEN_PREFIX + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verify_gate_token(
    secret: bytes, token: str, *, workflow_id: str, gate: str, attempt: int
) -> bool:
    """Whether ``token`` is the one ``gate_token`` gives for these values (constant time)."""
    expected = gate_token(secret, workflow_id, gate, attempt)
    return hmac.compare_digest(expected.encode("ascii"), token.encode("utf-8", "replace"))


NEW_SECRET = "e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"


def checked_secret(
    secret: bytes | SecretStr,
    *,
    setting: str = "the gate token secret",
    remedy: str = f"set it to at least {MIN_SECRET_BYTES} random bytes (32 recommended, "
    f"{NEW_SECRET})",
) -> bytes:
    """The gate secret as the rules take it, refused when too short to be safe.

    The one rule for every holder of the secret (the tracker, the gateway, a replay,
    an agent that verifies approvals): each checks at start and says which of its
    settings to fix, since a secret that differs between them makes every token
    read as forged.

    Args:
        secret: the secret, or the setting holding it.
        setting: the name the message gives it (the environment variable).
        remedy: what to set it to, from the holder's point of view.

    Raises:
        GateSecretError: it has fewer than ``MIN_SECRET_BYTES`` bytes; tokens signed
            with it could be guessed.
    """
    raw = secret.get_secret_value().encode() if isinstance(secret, SecretStr) else secret
    if len(raw) < MIN_SECRET_BYTES:
        raise GateSecretError(
            f"{setting} is unset or shorter than {MIN_SECRET_BYTES} bytes ({len(raw)}): "
            f"tokens signed with it could be guessed; {remedy}"
        )
    return raw
