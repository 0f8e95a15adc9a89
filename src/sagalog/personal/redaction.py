"""Personal data a handler revealed, kept out of the failure texts it leaves behind.

A handler opens a sealed field (``HandlerContext.reveal``) to hand the plaintext to a
system that needs it: an ERP, a mail server, a model. When that call fails, the
system's answer often quotes the request (a validation error naming the field, a
model's "invalid content: ..."), and the runtime writes the error's text to the
log: the ``StepFailed`` reason, which the tracker copies into its transitions and
compensation requests, the dead letter's reason and stack, the retry record's error.
Those are records ``sagalog audit`` shows and an erasure cannot reach, so a revealed
value must not be in them. The runtime passes every such text through ``redact``
with what the handler revealed; the error class and the rest of the text stay, so
the failure still says what went wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

REDACTED = "<personal data>"
"""What stands in a failure text where a revealed value was."""

_HEAD = 8
"""The shortest head of a value ``redact`` removes where the rest is missing: a client
that quotes the first n bytes of an answer may cut a value in two, and its first
characters are still the person's. Shorter values are only found whole."""

_HEAD_SPAN = 256
"""How much of a long value the head rule follows (a quote is a few hundred bytes)."""


def redact(text: str, revealed: Iterable[str]) -> str:
    """``text`` with every revealed value replaced by ``REDACTED``.

    A value is found as written, as JSON writes it inside a string (a body quoted from
    an answer), and as Python's ``repr`` of the UTF-8 bytes of either writes it (a
    body quoted with ``{body!r}``); its first ``_HEAD`` characters or more, cut
    short, too.
    """
    forms = sorted({form for value in revealed if value for form in _forms(value)}, key=len)
    for form in reversed(forms):  # the longest first: a value inside another goes with it
        text = text.replace(form, REDACTED)
    for form in reversed(forms):
        if len(form) > _HEAD:
            text = _head_pattern(form).sub(REDACTED, text)
    return text


def _head_pattern(form: str) -> re.Pattern[str]:
    """``form``'s first ``_HEAD`` characters and as many of the next ones as follow."""
    rest = form[_HEAD:_HEAD_SPAN]
    pattern = "".join(f"(?:{re.escape(c)}" for c in rest) + ")?" * len(rest)
    return re.compile(re.escape(form[:_HEAD]) + pattern)


def _forms(value: str) -> set[str]:
    """The ways ``value`` is written in the texts a failure carries."""
    quoted = json.dumps(value)[1:-1]
    return {value, quoted, repr(value.encode())[2:-1], repr(quoted.encode())[2:-1]}
