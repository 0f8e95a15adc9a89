"""Dev mode: a SCRAM-SHA-512 user per declared principal, so each service logs in as itself.

``sagalog topology apply --dev-users`` creates, on the brokers, the SCRAM user ``<name>``
of every ``User:<name>`` the topology declares. The passwords are not kept here: they
are the secure dev stack's (``CredentialStore``, ``<state_dir>/security/passwords``),
the same ones ``sagalog dev env --principal NAME`` prints, so whichever of the two runs
first makes the password and the other uses it. On a real cluster, users come from its
identity system; this is for the local secure stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from sagalog.devstack.credentials import SCRAM_ITERATIONS, SCRAM_MECHANISM, CredentialStore
from sagalog.errors import ConfigurationError, SagalogError

#: The dev stack's mechanism, as the admin API spells it.
_MECHANISM = ScramMechanism[SCRAM_MECHANISM.replace("-", "_")]


def user_of(principal: str) -> str:
    """``User:intake-agent`` -> ``intake-agent`` (the SCRAM user name)."""
    kind, _, name = principal.partition(":")
    if kind != "User" or not name:
        raise ConfigurationError(f"principal {principal!r} is not User:<name>; no SCRAM user")
    return name


def ensure_dev_users(
    admin: AdminClient,
    principals: Iterable[str],
    passwords: CredentialStore,
    *,
    timeout: float,
    report: Callable[[str], None],
) -> list[str]:
    """Create the missing SCRAM users; returns the user names created or given a password.

    A user is left alone when the brokers have it and its password is in the store.
    One the brokers lack is created with the stored password (made now if there is
    none yet); one whose password was lost (the store's file deleted) gets a new one,
    since the old cannot be read back. The password is stored before the brokers
    are told, so a failed call leaves one the next run uses.

    Raises:
        ConfigurationError: a principal that is not ``User:<name>``, or a name the
            store refuses.
        SagalogError: the brokers refused to list or change the SCRAM users.
    """
    users = sorted({user_of(p) for p in principals})
    if not users:
        return []
    known = _users_with_scram(admin, users, timeout=timeout)
    done = []
    for user in users:
        if user in known and passwords.existing(user) is not None:
            continue
        credential = passwords.credential(user)
        upsert = UserScramCredentialUpsertion(
            user,
            ScramCredentialInfo(_MECHANISM, SCRAM_ITERATIONS),
            credential.password.get_secret_value().encode(),
        )
        [future] = admin.alter_user_scram_credentials([upsert], request_timeout=timeout).values()
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            raise SagalogError(
                f"creating the SCRAM user {user} failed: {exc.args[0].str()}"
            ) from exc
        report(
            f"done: {SCRAM_MECHANISM} user {user} (password: `sagalog dev env --principal {user}`)"
        )
        done.append(user)
    return done


def _users_with_scram(admin: AdminClient, users: list[str], *, timeout: float) -> set[str]:
    futures = admin.describe_user_scram_credentials(users, request_timeout=timeout)
    assert isinstance(futures, dict)
    found = set()
    for user, future in futures.items():
        try:
            description = future.result(timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.RESOURCE_NOT_FOUND:
                continue
            raise SagalogError(f"reading the SCRAM users failed: {exc.args[0].str()}") from exc
        mechanisms = {info.mechanism for info in description.scram_credential_infos}
        if _MECHANISM in mechanisms:
            found.add(user)
    return found
