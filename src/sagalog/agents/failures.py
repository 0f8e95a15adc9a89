"""Failure classes of a handler, and the retry rule each carries as data.

A handler fails in one of two ways that matter: the failure may pass (a timeout, a
dependency briefly down) and the event is retried with backoff, or it will not (the
event is invalid, a business rule refuses it) and retrying only delays the
compensation. The class is decided here, once, from the exception; handlers raise
``NonRetryableError`` (or ``RetryableError``) to say so explicitly.
"""

from __future__ import annotations

import asyncio

import pydantic

from sagalog.errors import EventValidationError, SagalogError, SchemaError


class HandlerError(SagalogError):
    """Raised by a handler to fail its step with an explicit retry rule.

    Attributes:
        retryable: whether another attempt could succeed.
    """

    retryable: bool = True

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class RetryableError(HandlerError):
    """A failure that may pass: the event is retried with backoff, up to the bound."""

    retryable = True


class NonRetryableError(HandlerError):
    """A failure no retry can fix: the event is dead-lettered and its step fails at once."""

    retryable = False


class StepTimeout(RetryableError):
    """The handler ran past its step timeout and was cancelled."""


class DependencyUnavailable(SagalogError):
    """A dependency's circuit breaker is open or its rate budget is spent.

    Not a failure of the event: the runtime defers it until ``retry_at`` without
    counting an attempt, so work for that dependency waits instead of failing.
    """

    def __init__(self, dependency: str, *, retry_at: float) -> None:
        super().__init__(f"dependency '{dependency}' is unavailable until {retry_at:.3f}")
        self.dependency = dependency
        self.retry_at = retry_at


_NON_RETRYABLE = (
    EventValidationError,
    SchemaError,
    pydantic.ValidationError,
    TypeError,
    KeyError,
    ValueError,
)


def is_retryable(error: BaseException) -> bool:
    """Whether ``error`` deserves another attempt.

    Explicit ``HandlerError`` wins. Validation and programming errors (bad input,
    wrong types) never pass by themselves; timeouts, connection trouble and anything
    unknown are retried, bounded by the policy, because a retry is cheap and a
    wrongly failed step costs a compensation.
    """
    if isinstance(error, HandlerError):
        return error.retryable
    if isinstance(error, (TimeoutError, asyncio.TimeoutError, ConnectionError, OSError)):
        return True
    return not isinstance(error, _NON_RETRYABLE)


class BudgetWait(DependencyUnavailable):
    """A model call's budget has no room now, and its step's flow says ``wait``: the
    event is deferred, spending no attempt, until the window has room again."""

    def __init__(self, ledger: str, why: str, *, retry_at: float) -> None:
        super().__init__(f"budget {ledger}", retry_at=retry_at)
        self.args = (
            f"budget '{ledger}' is exhausted ({why}); the step waits for the window to "
            "refill (on_budget_exhausted: wait)",
        )


class BudgetRefused(NonRetryableError):
    """A model call's budget has no room now, and its step's flow says ``fail``: the
    step fails at once and the workflow compensates; or ``gate`` (``gated``): the step
    fails, the tracker opens its budget gate, and the event waits in the projection
    for the decision instead of going to the dead-letter topic. The class name is
    the ``StepFailed.error_class`` the tracker opens the gate on (``BUDGET_REFUSED``)."""

    def __init__(self, message: str, *, gated: bool = False) -> None:
        super().__init__(message)
        self.gated = gated
