"""The one error root of sagalog and its families.

Every error says what went wrong, with which input, and what to do next, so that a
message read in a CI log or a terminal is enough to act on. Callers catch
``SagalogError`` at the edge (the CLI turns it into a message and an exit code);
code inside the library raises the most specific family.
"""

from __future__ import annotations

from sagalog.exit_codes import ExitCode


class SagalogError(Exception):
    """Root of every error sagalog raises on purpose.

    Attributes:
        exit_code: the process exit code for this family (``sagalog.exit_codes``, one
            meaning each), so scripts and supervisors can tell bad input (2) from an
            unreachable service (3) from a refused change (4).
    """

    exit_code: int = ExitCode.FAILED


class ConfigurationError(SagalogError):
    """A setting or a file the user wrote is wrong; fix the named input and rerun."""

    exit_code = ExitCode.CONFIGURATION


class IncompatibleDependencyError(ConfigurationError):
    """An installed library lacks something sagalog relies on that it does not promise
    to keep (a private attribute renamed by an upgrade).

    Install the versions ``pyproject.toml`` pins; when upgrading on purpose, adapt the
    one module the message names. A restart does not help.
    """


class LocalStackError(SagalogError):
    """The embedded Kafka or schema registry could not be prepared, started or stopped."""

    exit_code = ExitCode.UNAVAILABLE


class ServiceUnavailableError(SagalogError):
    """A broker or the schema registry did not answer within the bounded wait.

    Check that it runs (``sagalog dev status``) and that the address in the settings
    is the one it listens on.
    """

    exit_code = ExitCode.UNAVAILABLE


class SchemaError(SagalogError):
    """A schema file is unreadable, or the catalog lacks a schema that was asked for."""

    exit_code = ExitCode.CONFIGURATION


class SchemaCompatibilityError(SchemaError):
    """A schema change breaks the compatibility rule (BACKWARD_TRANSITIVE).

    Old events are replayed by new code forever, so a reader built from the new
    schema must read every earlier version: give new fields a default, and never
    remove a field that has none.
    """

    exit_code = ExitCode.REFUSED


class EventValidationError(SagalogError):
    """An event's payload does not match its schema; the message names the field."""

    exit_code = ExitCode.CONFIGURATION


class TopologyError(ConfigurationError):
    """A topology file is malformed; the message names the file, the entry and the field."""


class FlowDefinitionError(ConfigurationError):
    """A flow definition (``topology/flows/*.yaml``) is refused when loaded.

    The message names the file, the flow, its version, the step or gate and the
    problem, one line per problem, so every mistake in a file is fixed in one pass;
    ``sagalog flows check`` runs the same check without starting anything.
    """


class AgentContractError(ConfigurationError):
    """An agent's declared handlers do not fit the flows that name it.

    The message names the agent, the flow version and the step of each mismatch (a
    handler for a step no flow gives the agent, a missing handler or compensation, an
    annotation naming an event the flow does not start or complete the step on); fix
    the handler or the flow file. ``sagalog flows check
    --agent <module>`` runs the same check without starting anything.
    """


class DestructiveChangeRefused(SagalogError):
    """A topology change would lose data or reorder keyed history; rerun with ``--force``
    only after reading why it was refused."""

    exit_code = ExitCode.REFUSED


class AuthenticationError(SagalogError):
    """The cluster or the registry refused a credential: a wrong password, a client
    certificate it does not trust, or a plaintext client on a TLS/SASL listener.

    The message names the principal and the address; fix the ``SAGALOG_SASL_*`` /
    ``SAGALOG_SSL_*`` settings (or ``sagalog dev env`` for the local stack) and rerun.
    """

    exit_code = ExitCode.AUTHENTICATION


class AuthorizationError(SagalogError):
    """The cluster denied a right: the message names the principal, the operation and
    the resource (topic, group or transactional id).

    Rights follow from the topology (``sagalog topology plan`` shows the ACLs each
    service gets); add the read or write to the flow or the service declaration and
    ``sagalog topology apply``, rather than granting it by hand.
    """

    exit_code = ExitCode.AUTHORIZATION


class PersonalDataError(SagalogError):
    """Personal data cannot be sealed or opened: no key-encryption key is configured
    where one is needed, the key file is unreadable, or an envelope does not open under
    its key (altered bytes). The message names the file, the subject or the record.

    Configure ``SAGALOG_PERSONAL_DATA_KEY_FILE`` (``sagalog dev env`` does for the local
    stack); an envelope that does not open is never shown as a value.
    """

    exit_code = ExitCode.CONFIGURATION
