"""Webhook signatures: an HMAC-SHA256 per source, over what the call asks the gateway to do.

An outside system that calls a webhook proves who it is with a secret it shares with
the gateway, one per source (``GATEWAY_WEBHOOK_SOURCES``). The header::

    X-Sagalog-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>

signs ``"<t>.<kind>.<query string as sent, or empty>.<body>"``, so a captured call
cannot be replayed later (``t`` must be within the tolerance of the gateway's clock),
against another kind, or against another workflow through the query string
(``workflow_id=`` or a correlation key such as ``filing_number=``).
Several ``v1=`` values may be sent while a secret is rotated; one match is enough.

The rule is pure: the API passes the header, the clock and the configured sources,
and publishes nothing unless this returns.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from sagalog.services.gateway.auth import matches_any
from sagalog.services.gateway.exceptions import BadSignature, KindNotAllowed

HEADER = "X-Sagalog-Signature"
SCHEME = "v1"


@dataclass(frozen=True, slots=True)
class WebhookSource:
    """A system allowed to call webhooks: its shared secret and the kinds it may send
    (empty: any kind)."""

    secret: bytes
    kinds: frozenset[str] = frozenset()


def signed_text(timestamp: int, kind: str, query: str, body: bytes) -> bytes:
    """The bytes a signature covers (``query``: the URL's query string, without ``?``)."""
    return f"{timestamp}.{kind}.{query}.".encode() + body


def sign_webhook(secret: bytes, *, kind: str, body: bytes, timestamp: int, query: str = "") -> str:
    """The ``X-Sagalog-Signature`` value a sender puts on a call (also what tests send)."""
    digest = hmac.new(secret, signed_text(timestamp, kind, query, body), hashlib.sha256)
    return f"t={timestamp},{SCHEME}={digest.hexdigest()}"


def verify_webhook(
    *,
    source: str,
    kind: str,
    query: str,
    body: bytes,
    signature: str | None,
    sources: Mapping[str, WebhookSource],
    now_s: float,
    tolerance_s: float,
) -> None:
    """Accept the call, or refuse it naming the source and what to fix.

    Raises:
        BadSignature: unknown source, no or malformed signature, a timestamp outside
            the tolerance, or no ``v1`` value that matches (401).
        KindNotAllowed: the source is genuine but may not send ``kind`` (403).
    """
    known = sources.get(source)
    if known is None:
        raise BadSignature(
            f"webhook source '{source[:80]}' is not one this gateway accepts; name a "
            f"configured source in X-Webhook-Source (the operator lists them in "
            "GATEWAY_WEBHOOK_SOURCES) and sign the call with its secret",
            source=source[:80],
        )
    if not signature:
        raise BadSignature(
            f"the webhook from '{source}' is not signed: send {HEADER}: t=<unix seconds>,"
            f"{SCHEME}=<hex HMAC-SHA256 of '<t>.<kind>.<query string>.<body>' with the "
            "source's secret>",
            source=source,
        )
    timestamp, digests = _parse(signature, source)
    if abs(now_s - timestamp) > tolerance_s:
        raise BadSignature(
            f"the signature of the webhook from '{source}' is dated t={timestamp}, "
            f"{now_s - timestamp:+.0f} s from the gateway's clock (tolerance "
            f"{tolerance_s:.0f} s): sign each call when it is sent, and check the sender's clock",
            source=source,
        )
    expected = hmac.new(
        known.secret, signed_text(timestamp, kind, query, body), hashlib.sha256
    ).hexdigest()
    if not matches_any(expected.encode(), (d.encode() for d in digests)):
        raise BadSignature(
            f"the signature of the webhook from '{source}' (kind '{kind}') does not match "
            "its body: check the source's secret, and that the query string and the body "
            "are sent byte for byte as signed",
            source=source,
            kind=kind,
        )
    if known.kinds and kind not in known.kinds:
        raise KindNotAllowed(
            f"webhook source '{source}' may not send kind '{kind}' (it may send: "
            f"{', '.join(sorted(known.kinds))}); ask the gateway's operator to allow it",
            source=source,
            kind=kind,
        )


def _parse(signature: str, source: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    digests: list[str] = []
    for part in signature.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == SCHEME and value:
            digests.append(value.strip().lower())
    if timestamp is None or not digests:
        raise BadSignature(
            f"the {HEADER} header of the webhook from '{source}' is malformed; expected "
            f"t=<unix seconds>,{SCHEME}=<hex digest>",
            source=source,
        )
    return timestamp, digests
