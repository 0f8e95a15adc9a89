"""What can stop an audit, and what to do about it."""

from __future__ import annotations

from sagalog.errors import SagalogError
from sagalog.exit_codes import ExitCode


class AuditError(SagalogError):
    """An audit cannot be made as asked: a topic is missing, or a mapping is malformed.

    The message names the topic or the option; check the names with
    ``sagalog topology plan`` and the cluster with ``sagalog dev status``.
    """

    exit_code = ExitCode.CONFIGURATION


class UnknownWorkflowError(AuditError):
    """The tracker holds no record of the workflow: the id is wrong, or the tracker
    (its app id) is another one. ``sagalog workflows list`` lists the known ids."""
