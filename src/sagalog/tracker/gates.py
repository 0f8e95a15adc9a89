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
    _check(secret)
    message = json.dumps([workflow_id, gate, attempt], separators=(",", ":"), ensure_ascii=False)
    digest = hmac.new(secret, _CONTEXT + message.encode("utf-8"), hashlib.sha256).digest()
    return TOKEN_PREFIX + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verify_gate_token(
    secret: bytes, token: str, *, workflow_id: str, gate: str, attempt: int
) -> bool:
    """Whether ``token`` is the one ``gate_token`` gives for these values (constant time)."""
    expected = gate_token(secret, workflow_id, gate, attempt)
    return hmac.compare_digest(expected.encode("ascii"), token.encode("utf-8", "replace"))


def _check(secret: bytes) -> None:
    if len(secret) < MIN_SECRET_BYTES:
        raise GateSecretError(
            f"the gate token secret has {len(secret)} bytes; tokens signed with it could be "
            f"guessed. Set it to at least {MIN_SECRET_BYTES} random bytes (32 recommended, "
            "e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
