"""Field validators the file formats share (flows, topology services), defined once."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BeforeValidator


def checked(pattern: re.Pattern[str], what: str) -> Any:
    """A validator that refuses a string not matching ``pattern``, saying what it must be.

    The message names the value and what was expected, so a loader's error (which
    adds the file and the entry) is enough to fix the file.
    """

    def check(value: Any) -> Any:
        if isinstance(value, str) and not pattern.match(value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return BeforeValidator(check)
