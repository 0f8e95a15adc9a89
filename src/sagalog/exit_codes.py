"""One meaning per exit code, for every sagalog process, and what a supervisor does with it.

A supervisor (Kubernetes, compose, systemd, the demo's fleet, the chaos harness) sees
nothing of a process but its exit code. A code that meant both "restart me" (a tracker
whose partition stalled) and "do not restart me" (an agent fenced by a newer instance
with its transactional id) would leave no restart policy right for both. Here each code
has one meaning and one policy, and every service, the CLI and every supervisor in this
repository read it from this module; the table in docs/service-contract.md is rendered
from ``CONTRACT``; a test keeps the two equal.

The small codes follow the error families of ``sagalog.errors`` (each family's
``exit_code`` is one of these); 70 is ``EX_SOFTWARE`` from sysexits.h, the code a
process uses to say "something in me failed; a fresh process may not".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum


class ExitCode(IntEnum):
    """The exit codes of sagalog's services and CLI."""

    STOPPED = 0
    FAILED = 1
    CONFIGURATION = 2
    UNAVAILABLE = 3
    REFUSED = 4
    AUTHENTICATION = 5
    AUTHORIZATION = 6
    FENCED = 7
    PLAN_DIFFERS = 10
    RESTART = 70


class Restart(StrEnum):
    """What a supervisor does when a service exits with a code."""

    NO = "no"
    """Starting again fails the same way (or undoes a newer instance): fix the named input first."""
    BACKOFF = "with backoff"
    """A fresh process may succeed later; wait longer between tries, and alert on a loop."""
    AT_ONCE = "at once"
    """The process gave its work back on purpose so that a fresh one takes it now."""
    NOT_A_SERVICE = "-"
    """Only the CLI exits with it; no service does."""

    @property
    def restarts(self) -> bool:
        return self in (Restart.BACKOFF, Restart.AT_ONCE)


@dataclass(frozen=True)
class ExitMeaning:
    """One row of the contract: the code, what it means, and the policy that follows."""

    code: ExitCode
    meaning: str
    restart: Restart
    example: str


CONTRACT: tuple[ExitMeaning, ...] = (
    ExitMeaning(
        ExitCode.STOPPED,
        "stopped on request (SIGTERM or SIGINT) after finishing and committing its batch",
        Restart.NO,
        "a rolling restart, `docker compose stop`",
    ),
    ExitMeaning(
        ExitCode.FAILED,
        "an error sagalog did not foresee (a bug): the log holds the traceback",
        Restart.BACKOFF,
        "an exception escaping a handler's framework code",
    ),
    ExitMeaning(
        ExitCode.CONFIGURATION,
        "a setting, flow, schema or agent declaration is wrong, or an installed library "
        "lacks what sagalog needs; the message names the input",
        Restart.NO,
        "a handler the flow does not give the agent; a missing gate secret",
    ),
    ExitMeaning(
        ExitCode.UNAVAILABLE,
        "Kafka or the schema registry did not answer within the bounded wait",
        Restart.BACKOFF,
        "the broker down for longer than `outage_limit_s`",
    ),
    ExitMeaning(
        ExitCode.REFUSED,
        "the CLI refused a change that would lose data or break compatibility",
        Restart.NOT_A_SERVICE,
        "`sagalog topology apply` deleting a topic without `--force`",
    ),
    ExitMeaning(
        ExitCode.AUTHENTICATION,
        "the cluster or the registry refused the credential; the message names the "
        "principal and the address",
        Restart.NO,
        "a wrong SCRAM password",
    ),
    ExitMeaning(
        ExitCode.AUTHORIZATION,
        "the cluster denied a right; the message names the principal, the operation and "
        "the resource (apply the topology's ACLs)",
        Restart.NO,
        "an agent without WRITE on its output topic",
    ),
    ExitMeaning(
        ExitCode.FENCED,
        "a newer instance with the same instance id took over; this one is a zombie",
        Restart.NO,
        "an agent paused (SIGSTOP) while a replacement with its instance id started",
    ),
    ExitMeaning(
        ExitCode.PLAN_DIFFERS,
        "`sagalog topology plan --detailed-exitcode`: the cluster differs from the topology",
        Restart.NOT_A_SERVICE,
        "a CI job that gates a deployment on an empty plan",
    ),
    ExitMeaning(
        ExitCode.RESTART,
        "the process gave its work back so that a fresh process takes it over",
        Restart.AT_ONCE,
        "a tracker partition that stalled; an agent whose clients could not be rebuilt",
    ),
)

_BY_CODE = {row.code: row for row in CONTRACT}


def meaning_of(code: int) -> ExitMeaning | None:
    """The contract's row for ``code``; None for a code no sagalog process exits with."""
    try:
        return _BY_CODE[ExitCode(code)]
    except ValueError:
        return None


def restart_policy(code: int) -> Restart:
    """What a supervisor does when a service exits with ``code`` (a Popen returncode).

    A process killed by a signal (a negative returncode) did not choose its exit: an
    OOM kill or a SIGKILL is restarted with backoff, as an unforeseen failure is. A
    code outside the contract is treated the same way, since something other than
    sagalog ended the process.
    """
    if code < 0:
        return Restart.BACKOFF
    row = meaning_of(code)
    return row.restart if row is not None else Restart.BACKOFF


def markdown_table() -> str:
    """The contract as docs/service-contract.md shows it (a test keeps the two equal)."""
    lines = [
        "| code | meaning | restart | for example |",
        "|---|---|---|---|",
    ]
    for row in CONTRACT:
        lines.append(
            f"| {int(row.code)} `{row.code.name}` | {row.meaning} | {row.restart.value} "
            f"| {row.example} |"
        )
    return "\n".join(lines)
