"""What a webhook call must carry to become a ``WebhookReceived`` event: pure checks.

A webhook is shaped by whoever sends it, so its body is kept verbatim as JSON text;
the gateway only insists that it *is* JSON, that it fits the size limit, and that
it names its workflow: in the URL (``?workflow_id=``, the usual way: the callback URL
handed to the outside system names the workflow), as a top-level ``"workflow_id"``
field of a JSON object, or by a correlation key its flow declares
(``?filing_number=F-2026-0042``), for a system that knows the business reference and
never saw the workflow id. The key is resolved by the gateway's read model.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from sagalog.services.gateway.exceptions import BodyTooLarge, MalformedBody

KIND_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
_KIND = re.compile(KIND_PATTERN)
MAX_WORKFLOW_ID = 256
MAX_SOURCE = 200
_WEBHOOK_IDS = uuid.UUID("0b8e54c1-7d2a-5e39-8f46-5c3d2a1e9b70")


@dataclass(frozen=True, slots=True)
class WebhookCall:
    """A webhook call that passed the checks, ready to publish.

    ``workflow_id`` is None when the call names its workflow by ``correlation``
    (``(key, value)``), which the gateway resolves before publishing.
    """

    kind: str
    workflow_id: str | None
    source: str
    payload_json: str
    correlation: tuple[str, str] | None = None

    @property
    def target(self) -> str:
        """The workflow as the call named it, for messages and the idempotency key."""
        if self.workflow_id is not None:
            return self.workflow_id
        assert self.correlation is not None
        return f"{self.correlation[0]}={self.correlation[1]}"


def read_webhook(
    kind: str,
    body: bytes,
    *,
    workflow_id: str | None,
    source: str | None,
    default_source: str,
    max_bytes: int,
    correlation: Mapping[str, str] | None = None,
    keys: frozenset[str] = frozenset(),
) -> WebhookCall:
    """Check one webhook call.

    ``correlation``: the query parameters other than ``workflow_id``; each must be one
    of ``keys``, the correlation keys the loaded flows declare, and one names the workflow.

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
    by_key = _correlation(correlation or {}, keys)
    named = workflow_id
    if named is None and by_key is None and isinstance(parsed, dict):
        field = parsed.get("workflow_id")
        named = field if isinstance(field, str) else None
    if by_key is None and (not named or len(named) > MAX_WORKFLOW_ID):
        declared = f" or ?<key>=<value> with a correlation key ({', '.join(sorted(keys))})"
        raise MalformedBody(
            "the webhook names no workflow: add ?workflow_id=<id> to the URL"
            f'{declared if keys else ""}, or a top-level "workflow_id" string field '
            f"(1-{MAX_WORKFLOW_ID} characters) to the JSON object"
        )
    if named is not None and by_key is not None:
        raise MalformedBody(
            f"the webhook names its workflow twice (workflow_id and {by_key[0]}); keep one"
        )
    caller = (source or "").strip() or default_source
    if len(caller) > MAX_SOURCE:
        raise MalformedBody(f"X-Webhook-Source is longer than {MAX_SOURCE} characters")
    return WebhookCall(
        kind=kind, workflow_id=named, source=caller, payload_json=text, correlation=by_key
    )


def _correlation(given: Mapping[str, str], keys: frozenset[str]) -> tuple[str, str] | None:
    unknown = sorted(k for k in given if k not in keys)
    if unknown:
        declared = ", ".join(sorted(keys)) or "none"
        raise MalformedBody(
            f"unknown query parameter(s) {unknown}: a webhook takes ?workflow_id= or one "
            f"correlation key its flows declare (declared: {declared})",
            parameters=unknown,
        )
    if len(given) > 1:
        raise MalformedBody(
            f"the webhook names {len(given)} correlation keys ({', '.join(sorted(given))}); "
            "name its workflow by one"
        )
    for name, value in given.items():
        if not value or len(value) > MAX_WORKFLOW_ID:
            raise MalformedBody(
                f"correlation key {name} needs a value of 1-{MAX_WORKFLOW_ID} characters"
            )
        return name, value
    return None


def webhook_event_id(call: WebhookCall, idempotency_key: str | None) -> str | None:
    """A fixed ``ce_id`` for a retried call that carries an Idempotency-Key, else None."""
    if not idempotency_key:
        return None
    name = f"webhook\x00{call.kind}\x00{call.target}\x00{idempotency_key}"
    return str(uuid.uuid5(_WEBHOOK_IDS, name))
