"""Effects in a test: a stub per effect name, and every call recorded with its key.

A handler reaches the world outside Kafka only through ``ctx.effect(name, call, ...)``,
so a test can stand a stub in for ``call`` by ``name`` and leave the handler as it
is. Only the call itself is replaced (``HandlerContext.perform``): the idempotency
key, the ledger that answers a repeat without calling, the circuit breaker and the
``EffectRecorded`` in the log are the runtime's own, so what a test sees of retries
and redeliveries is what production does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sagalog.errors import ConfigurationError

if TYPE_CHECKING:
    from sagalog.agents.context import HandlerContext

_UNSET: Any = object()


@dataclass(frozen=True)
class EffectCall:
    """One call of an effect, as the dependency would have received it.

    Attributes:
        effect: the effect's name (``ledger.reserve``).
        agent: the agent whose handler made it.
        step: the step the handler performs.
        workflow_id: the workflow.
        attempt: the handler's attempt (1, then 2 for the first retry...).
        idempotency_key: the key the runtime passed; the same on every attempt of
            one event, which is how a dependency recognizes a repeat.
        args: the positional arguments after the function.
        kwargs: the keyword arguments, ``idempotency_key`` left out.
        stubbed: whether a stub answered (False: the real function ran).
        error: what it raised, if it raised.
    """

    effect: str
    agent: str
    step: str
    workflow_id: str
    attempt: int
    idempotency_key: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    stubbed: bool
    error: BaseException | None = None


@dataclass
class EffectStub:
    """What a stubbed effect does: ``call(*args, idempotency_key=..., **kwargs)`` if
    given, else raise ``raises`` (an exception, or one per call in turn, ``None``
    meaning answer), else return ``returns``."""

    returns: Any = None
    raises: BaseException | list[BaseException | None] | None = None
    call: Callable[..., Any] | None = None
    calls: int = 0

    async def answer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.calls += 1
        if self.call is not None:
            result = self.call(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result
        raises = self.raises
        if isinstance(raises, list):
            raises = raises.pop(0) if raises else None
        if raises is not None:
            raise raises
        return self.returns


@dataclass
class EffectStubs:
    """The stubs of one test environment and the calls its handlers made.

    Attributes:
        strict: an effect without a stub fails its handler (and the test, from
            ``run_until_quiet``) instead of calling the real function.
    """

    strict: bool = False
    stubs: dict[str, EffectStub] = field(default_factory=dict)
    calls: list[EffectCall] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    answers: dict[tuple[str, str], Any] = field(default_factory=dict)
    """What each stub answered, by (effect, idempotency key): its lookup's memory."""

    def stub(
        self,
        effect: str,
        *,
        returns: Any = _UNSET,
        raises: BaseException | list[BaseException | None] | None = None,
        call: Callable[..., Any] | None = None,
    ) -> EffectStub:
        """Stand a stub in for ``effect``'s calls from now on (replacing an earlier one)."""
        if call is not None and (returns is not _UNSET or raises is not None):
            raise ConfigurationError(
                f"stub of effect '{effect}': give call=, or returns=/raises=, not both"
            )
        stub = EffectStub(
            returns=None if returns is _UNSET else returns,
            raises=list(raises) if isinstance(raises, list) else raises,
            call=call,
        )
        self.stubs[effect] = stub
        return stub

    def of(self, effect: str | None = None, *, workflow_id: str | None = None) -> list[EffectCall]:
        """The calls made, in order, of one effect and/or one workflow."""
        return [
            c
            for c in self.calls
            if (effect is None or c.effect == effect)
            and (workflow_id is None or c.workflow_id == workflow_id)
        ]

    def perform(
        self,
        ctx: HandlerContext,
        effect: str,
        real: Callable[..., Any],
        real_lookup: Callable[..., Any] | None,
    ) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
        """The functions the runtime calls in the place of an effect's call and of its
        lookup (``HandlerContext.perform``). A stubbed effect's lookup answers as a
        dependency that honours keys does: what the stub answered under the key, or
        None when no call with it succeeded."""
        stub = self.stubs.get(effect)

        async def look_up(*, idempotency_key: str) -> Any:
            if stub is not None:
                return self.answers.get((effect, idempotency_key))
            assert real_lookup is not None
            found = real_lookup(idempotency_key=idempotency_key)
            return await found if inspect.isawaitable(found) else found

        async def stand_in(*args: Any, idempotency_key: str, **kwargs: Any) -> Any:
            error: BaseException | None = None
            try:
                if stub is not None:
                    answer = await stub.answer(args, {**kwargs, "idempotency_key": idempotency_key})
                    self.answers[(effect, idempotency_key)] = answer
                    return answer
                if self.strict:
                    self.missing.append(effect)
                    raise ConfigurationError(
                        f"effect '{effect}' of agent '{ctx.agent}' (step '{ctx.step}') has no "
                        f"stub; add env.stub_effect({effect!r}, returns=...) or let the real "
                        "function run (strict_effects=False)"
                    )
                result = real(*args, idempotency_key=idempotency_key, **kwargs)
                return await result if inspect.isawaitable(result) else result
            except BaseException as exc:
                error = exc
                raise
            finally:
                self.calls.append(
                    EffectCall(
                        effect=effect,
                        agent=ctx.agent,
                        step=ctx.step,
                        workflow_id=ctx.workflow_id,
                        attempt=ctx.attempt,
                        idempotency_key=idempotency_key,
                        args=args,
                        kwargs=kwargs,
                        stubbed=stub is not None,
                        error=error,
                    )
                )

        return stand_in, None if real_lookup is None else look_up
