"""What a webhook call must carry to become a ``WebhookReceived`` event: pure checks.

A webhook is shaped by whoever sends it, so its body is kept verbatim as JSON text;
the gateway only insists that it *is* JSON, that it fits the size limit, and that
it names its workflow, either in the URL (``?workflow_id=``, the usual way: the
callback URL handed to the outside system names the workflow) or as a top-level
``"workflow_id"`` field of a JSON object.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

from sagalog.services.gateway.exceptions import BodyTooLarge, MalformedBody

KIND_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
_KIND = re.compile(KIND_PATTERN)
MAX_WORKFLOW_ID = 256
MAX_SOURCE = 200
_WEBHOOK_IDS = uuid.UUID("0b8e54c1-7d2a-5e39-8f46-5c3d2a1e9b70")


@dataclass(frozen=True, slots=True)
class WebhookCall:
    """A webhook call that passed the checks, ready to publish."""

    kind: str
    workflow_id: str
    source: str
    payload_json: str


def read_webhook(
    kind: str,
    body: bytes,
    *,
    workflow_id: str | None,
    source: str | None,
    default_source: str,
    max_bytes: int,
) -> WebhookCall:
    """Check one webhook call.

    Raises:
        BodyTooLarge: the body is over ``max_bytes`` (413).
        MalformedBody: the kind, the body or the workflow id is unusable (400); the
            message says which and how to fix it.
    """
    if not _KIND.match(kind):
        raise MalformedBody(
            f"webhook kind '{kind[:80]}' is not a valid name: use 1-64 lower-case letters, "
            "digits, '.', '_' or '-', starting with a letter or digit (e.g. signature.completed)",
            kind=kind[:80],
        )
    if len(body) > max_bytes:
        raise BodyTooLarge(
            f"the body has {len(body)} bytes, over the gateway's limit of {max_bytes}; send a "
            "smaller body (a reference to the document, not the document)",
            limit=max_bytes,
        )
    if not body.strip():
        raise MalformedBody(
            "the body is empty; send a JSON document (Content-Type: application/json)"
        )
    try:
        text = body.decode("utf-8")
        parsed = json.loads(text)
    except UnicodeDecodeError as exc:
        raise MalformedBody(f"the body is not UTF-8 text (byte {exc.start}); send JSON") from None
    except json.JSONDecodeError as exc:
        raise MalformedBody(
            f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            line=exc.lineno,
            column=exc.colno,
        ) from None
    named = workflow_id
    if named is None and isinstance(parsed, dict):
        field = parsed.get("workflow_id")
        named = field if isinstance(field, str) else None
    if not named or len(named) > MAX_WORKFLOW_ID:
        raise MalformedBody(
            "the webhook names no workflow: add ?workflow_id=<id> to the URL or a top-level "
            f'"workflow_id" string field (1-{MAX_WORKFLOW_ID} characters) to the JSON object'
        )
    caller = (source or "").strip() or default_source
    if len(caller) > MAX_SOURCE:
        raise MalformedBody(f"X-Webhook-Source is longer than {MAX_SOURCE} characters")
    return WebhookCall(kind=kind, workflow_id=named, source=caller, payload_json=text)


def webhook_event_id(call: WebhookCall, idempotency_key: str | None) -> str | None:
    """A fixed ``ce_id`` for a retried call that carries an Idempotency-Key, else None."""
    if not idempotency_key:
        return None
    name = f"webhook\x00{call.kind}\x00{call.workflow_id}\x00{idempotency_key}"
    return str(uuid.uuid5(_WEBHOOK_IDS, name))
