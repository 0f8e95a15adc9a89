"""Errors of the tracker's rules: each says what went wrong, with which input, and what to do.

Bad *input* (an unknown workflow, a forged token, a duplicate) is never an error here:
``decide`` answers it with a ``Decision`` whose outcome and reason feed a structured
warning and a counter. These errors are for mistakes of the code or the operator
around the rules: the wrong flow version handed to ``decide``, a stored record that
this release cannot read, a gate secret that would make tokens forgeable.
"""

from __future__ import annotations

from sagalog.errors import ConfigurationError, SagalogError


class TrackerError(SagalogError):
    """The tracker's rules were called in a way that cannot be right (a bug at the caller)."""


class StoredRecordError(TrackerError):
    """A stored workflow record cannot be read by this tracker release.

    Usually a record written by a *newer* release (its ``schema_version`` is higher
    than this one knows): roll the tracker forward again, never back past a release
    that has already written state.
    """


class GateSecretError(ConfigurationError):
    """The secret that signs gate resumption tokens is missing or too short to be safe."""
