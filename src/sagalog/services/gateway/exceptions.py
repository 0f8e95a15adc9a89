"""What the gateway refuses, each with its HTTP status and what the caller should do.

Every refusal is a ``GatewayError``; the API turns it into
``{"error": <message>, "detail": <data>}`` with ``status``, and a ``Retry-After``
header when the refusal carries ``retry_after_s`` (a 503: try again then, as it is).
The message is written for the person (or the script's log) that reads it: what
was wrong, with which input, and what to do next.
"""

from __future__ import annotations

from typing import Any

from sagalog.errors import SagalogError


class GatewayError(SagalogError):
    """Root of the gateway's refusals.

    Attributes:
        status: the HTTP status the API answers with.
        detail: machine-readable context (the workflow, the gate, the state).
        retry_after_s: seconds after which the same request may succeed (the
            ``Retry-After`` header); None for a refusal that retrying cannot cure.
    """

    status: int = 400
    retry_after_s: int | None = None

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.detail = detail or None


class MissingApiKey(GatewayError):
    """No API key came with the request: send one in the X-API-Key header."""

    status = 401


class WrongApiKey(GatewayError):
    """The API key is not one the gateway accepts: ask its operator for a valid key."""

    status = 403


class ReadOnlyKey(GatewayError):
    """The key (or the console session signed in with it) is read-only: it may look, not act."""

    status = 403


class SignInRequired(GatewayError):
    """The console page needs a session: none came, or it expired, or its key was rotated
    out. A page answers with a redirect to the sign-in page instead."""

    status = 401


class BadCsrfToken(GatewayError):
    """A console POST came without the session's CSRF token (or with another's): it may
    have been sent by another site in the browser's name, so nothing is done."""

    status = 403


class BadQuery(GatewayError):
    """A console filter, search or cursor is not one the page understands; the message
    names the parameter and what it takes."""

    status = 400


class BadStreamRequest(GatewayError):
    """A stream request the gateway cannot serve as asked (a ``Last-Event-ID`` it never
    sent): reconnect without it to replay what the stream holds."""

    status = 400


class ForgedToken(GatewayError):
    """The gate token was not signed by the tracker for this workflow."""

    status = 403


class BadSignature(GatewayError):
    """A webhook's signature is missing, forged, stale, or from a source the gateway does
    not know: the caller cannot be told apart from an impostor, so nothing is written."""

    status = 401


class KindNotAllowed(GatewayError):
    """A genuine source sent a webhook kind it is not configured to send."""

    status = 403


class UnknownWorkflow(GatewayError):
    """The read model has no workflow with that id (or has not caught up with it yet)."""

    status = 404


class AmbiguousKey(GatewayError):
    """A correlation key names several running workflows: name the one meant by its id."""

    status = 409


class AlreadyEnded(GatewayError):
    """The workflow ended, or is compensating already: there is nothing left to cancel."""

    status = 409


class NoOpenGate(GatewayError):
    """The workflow waits for no decision now: it was decided, or it never reached the gate."""

    status = 409


class ExpiredToken(GatewayError):
    """The token is genuine but for an earlier opening of the gate, or another gate."""

    status = 409


class AlreadyDecided(GatewayError):
    """The gate was already decided through this gateway, the other way."""

    status = 409


class MalformedPosition(GatewayError):
    """A dead letter's position is not ``topic/partition/offset``."""

    status = 400


class NotADeadLetter(GatewayError):
    """The position is not in a dead-letter topic, or the record there carries no
    dead-letter headers: there is nothing to replay from it."""

    status = 400


class UnknownDeadLetter(GatewayError):
    """No record lies at that position (past the end, or deleted by the topic's retention)."""

    status = 404


class AlreadyReplayed(GatewayError):
    """The dead letter was replayed before; asking again (``again``) replays it once more."""

    status = 409


class NotReplayable(GatewayError):
    """The dead letter names no workflow, so no audit trail could say who replayed it."""

    status = 409


class MalformedBody(GatewayError):
    """The request body is not what the endpoint takes (not JSON, wrong shape)."""

    status = 400


class BodyTooLarge(GatewayError):
    """The request body is over ``GATEWAY_MAX_BODY_BYTES``."""

    status = 413


class NotReady(GatewayError):
    """The read model is still catching up with the tracker; retry in a few seconds."""

    status = 503
    retry_after_s = 5


class PublishFailed(GatewayError):
    """Kafka did not acknowledge the event (a broker away, a leader moving): retry the
    same request after ``Retry-After``; its event id is stable, so it lands once."""

    status = 503
    retry_after_s = 2


class FlowNotLoaded(GatewayError):
    """The workflow's flow version is not in the gateway's topology/flows: deploy it there."""

    status = 500
