"""What an event class says about its Avro form that its Python types cannot.

The class is the one definition of an event (``contracts.avro_from_model`` writes its
``.avsc``), and most of the schema follows from the annotations: ``str`` is a string,
``X | None = None`` an optional field. Three facts of the committed schemas have no
Python type of their own, so they are said here, on the class, once:

- ``Int32``: a 32-bit Avro ``int`` (a plain ``int`` is a 64-bit ``long``). Schemas
  already in the registry use ``int`` for counts and versions; changing one to
  ``long`` would be a new schema, so the class says which it is.
- ``PersonalData(subject=...)``: the field holds personal data of the subject the
  named field identifies (``sagalog.personal``); it becomes the field's
  ``"sagalog.personal"`` attribute, which the runtime seals by.
- ``enum_default(symbol)``: the symbol an older reader takes for a symbol it does
  not know (Avro's enum default), so adding a symbol later does not break readers.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

from pydantic import Field

from sagalog.errors import SchemaError

E = TypeVar("E", bound=type[enum.Enum])


@dataclass(frozen=True)
class AvroInt:
    """Marks an ``int`` as Avro's 32-bit ``int`` rather than the default ``long``."""


Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1), AvroInt()]
"""An integer written as Avro ``int``: 32 bits, checked when the event is built."""


@dataclass(frozen=True)
class PersonalData:
    """Marks a text field as personal data of the subject ``subject`` names
    (``sagalog.personal``): ``requester: Annotated[str, PersonalData("requester")]``."""

    subject: str


_ENUM_DEFAULTS: dict[type[enum.Enum], str] = {}


def enum_default(symbol: str) -> Callable[[E], E]:
    """Class decorator: ``symbol`` is the Avro enum's default, the symbol a reader uses
    for one it does not know (a symbol added after the reader was built).

    Raises:
        SchemaError: ``symbol`` is not a value of the enum.
    """

    def mark(cls: E) -> E:
        values = [member.value for member in cls]
        if symbol not in values:
            raise SchemaError(
                f"enum {cls.__qualname__}: default {symbol!r} is not one of its values "
                f"{values}; name one of them in @enum_default"
            )
        _ENUM_DEFAULTS[cls] = symbol
        return cls

    return mark


def default_of_enum(cls: type[enum.Enum]) -> str | None:
    """The symbol ``enum_default`` gave ``cls``, or None."""
    return _ENUM_DEFAULTS.get(cls)
