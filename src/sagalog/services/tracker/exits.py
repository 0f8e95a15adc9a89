"""How a crashed tracker exits: ``RESTART`` (70) when a restart helps, else the error's code.

A failed batch or a stalled partition exits the process at once (``crash``), so
a restarted or surviving worker takes the records over. That is right for a broker
away or a faust bug, and wrong for a right the cluster denies: the new process would
be refused the same write and exit again, in a loop an operator reads as flakiness.
A denied right exits with ``AuthorizationError``'s code (6) and its message (the
principal, the operation, the resource) instead; a supervisor can tell the two apart.
So does an installed faust or aiokafka that lacks an attribute the tracker needs
(``IncompatibleDependencyError``, exit 2, see ``faust_internals``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import NoReturn

from sagalog.errors import AuthorizationError, IncompatibleDependencyError
from sagalog.exit_codes import ExitCode, restart_policy

log = logging.getLogger("sagalog.tracker")

#: Exited so that another worker processes the batch again (``sagalog.exit_codes``).
RESTART = ExitCode.RESTART


@dataclass(frozen=True)
class Exit:
    """The code the tracker exits with, and the line it logs first.

    Attributes:
        code: the process exit code.
        message: what went wrong; a denied right's names the principal, the operation
            and the resource (the traceback is logged with it either way).
    """

    code: int
    message: str

    @property
    def restart_helps(self) -> bool:
        """Whether a new process could get past it: the contract's policy for the code."""
        return restart_policy(self.code).restarts


def exit_for(why: str, error: BaseException | None) -> Exit:
    """The exit of a tracker that crashed for ``why`` while handling ``error``.

    The cause chain is searched (``raise ... from`` and exceptions raised while
    handling another), because a denied write can surface wrapped in the error of
    whatever called the sink.
    """
    denied = _beyond_restart(error)
    if denied is not None:
        return Exit(
            code=denied.exit_code,
            message=f"{why}: {denied}; a restart would be refused the same way",
        )
    cause = "" if error is None else f" ({error.__class__.__name__}: {error})"
    return Exit(
        code=RESTART,
        message=f"{why}{cause}; exiting so that it is processed again",
    )


def _beyond_restart(
    error: BaseException | None,
) -> AuthorizationError | IncompatibleDependencyError | None:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, AuthorizationError | IncompatibleDependencyError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def crash(why: str, error: BaseException | None = None) -> NoReturn:
    """Exit at once, storing and committing nothing more: the batch will be consumed again.

    faust would restart a crashed agent inside the process, past the records it had
    taken, so they would wait for the next rebalance. Exiting (code 70) hands them
    to a restarted or surviving worker now; the order of writes makes that safe. A
    right the cluster denies exits 6 instead, since no restart gets past it
    (``exits.exit_for`` decides).
    """
    decision = exit_for(why, error)
    log.critical(
        "%s",
        decision.message,
        exc_info=True,
        extra={
            "sagalog": {
                "agent": "saga-tracker",
                "action": "exit",
                "outcome": f"exit {decision.code}",
            }
        },
    )
    logging.shutdown()
    os._exit(decision.code)
