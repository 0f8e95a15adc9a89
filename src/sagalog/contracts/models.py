"""Pydantic event classes: the one definition of an event.

A class generates its ``.avsc`` (``contracts.avro_from_model``, ``sagalog schemas
generate``): ``class BudgetReserved(Event)`` with ``event_type =
"procurement.v1.BudgetReserved"`` writes ``schemas/procurement/v1/budget_reserved.avsc``,
its docstring's first paragraph the record's doc and its attribute docstrings the
fields' docs (``use_attribute_docstrings``). Every subclass is registered by its event
type, so a runtime can go from a ``ce_type`` header to the class.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict

from sagalog.errors import SchemaError

PLATFORM_EVENTS = "sagalog.events"
"""The module of the platform's own events, part of every project's schemas."""


class Event(BaseModel):
    """Base of every event class: immutable, and strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    event_type: ClassVar[str]
    _by_type: ClassVar[dict[str, type[Event]]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        event_type = cls.__dict__.get("event_type")
        if event_type is None:
            return  # an abstract intermediate class
        other = Event._by_type.get(event_type)
        if other is not None and other.__qualname__ != cls.__qualname__:
            raise SchemaError(
                f"event type '{event_type}' has two classes: {other.__module__}."
                f"{other.__qualname__} and {cls.__module__}.{cls.__qualname__}"
            )
        Event._by_type[event_type] = cls

    @classmethod
    def class_for(cls, event_type: str) -> type[Event] | None:
        """The class registered for ``event_type``, if its module has been imported."""
        return cls._by_type.get(event_type)

    @classmethod
    def registered(cls) -> dict[str, type[Event]]:
        """Every event class imported so far, by event type."""
        return dict(cls._by_type)

    @classmethod
    def defined_in(cls, modules: Iterable[str]) -> dict[str, type[Event]]:
        """The event classes defined in ``modules`` (not merely imported there), by event
        type: tests and other modules may declare events that are not a project's."""
        wanted = set(modules)
        return {t: c for t, c in cls._by_type.items() if c.__module__ in wanted}

    def to_avro(self) -> dict[str, Any]:
        """The Avro datum for this event (enums as their symbols)."""
        return self.model_dump(mode="python")

    @classmethod
    def from_avro(cls, payload: dict[str, Any]) -> Self:
        """Build the event from a decoded Avro datum."""
        return cls.model_validate(payload)
