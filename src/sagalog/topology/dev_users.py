"""Dev mode: a SCRAM-SHA-512 user per declared principal, so each service logs in as itself.

``sagalog topology apply --dev-users DIR`` (or ``SAGALOG_DEV_USERS_DIR``) creates, for
every ``User:<name>`` the topology declares, a SCRAM user ``<name>`` with a random
password, stored in ``DIR/scram/<name>.json`` (mode 0600, the folder 0700) and never
printed or logged. A second run changes nothing: a user that exists and whose
password file is there is left alone. On a real cluster, users come from its identity
system; this is for a local secured stack.

The storage is two small functions over a directory (``store_credentials``,
``read_credentials``), so a dev stack that keeps its state elsewhere points them at
its own folder.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from sagalog.errors import ConfigurationError, SagalogError

MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 8192


@dataclass(frozen=True)
class DevCredentials:
    username: str
    password: str
    mechanism: str = MECHANISM


def user_of(principal: str) -> str:
    """``User:intake-agent`` -> ``intake-agent`` (the SCRAM user name)."""
    kind, _, name = principal.partition(":")
    if kind != "User" or not name:
        raise ConfigurationError(f"principal {principal!r} is not User:<name>; no SCRAM user")
    return name


def credentials_path(directory: Path, username: str) -> Path:
    return directory / "scram" / f"{username}.json"


def store_credentials(directory: Path, credentials: DevCredentials) -> Path:
    """Write the credentials readable by the owner only; returns the file."""
    path = credentials_path(directory, credentials.username)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.parent.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)  # an existing file keeps its old mode otherwise
        json.dump(
            {
                "username": credentials.username,
                "password": credentials.password,
                "mechanism": credentials.mechanism,
            },
            handle,
        )
    return path


def read_credentials(directory: Path, username: str) -> DevCredentials | None:
    path = credentials_path(directory, username)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return DevCredentials(data["username"], data["password"], data.get("mechanism", MECHANISM))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(
            f"{path} is not a sagalog credentials file ({exc}); delete it and rerun to "
            "give the user a new password"
        ) from exc


def ensure_dev_users(
    admin: AdminClient,
    principals: Iterable[str],
    directory: Path,
    *,
    timeout: float,
    report: Callable[[str], None],
) -> list[str]:
    """Create the missing SCRAM users; returns the user names created or given a password.

    A user the cluster has but whose password file is missing gets a new password
    (the old one cannot be read back); a file without a user is created with the
    stored password. The file is written before the cluster is told, so a failed
    call leaves a password the next run uses.
    """
    users = sorted({user_of(p) for p in principals})
    if not users:
        return []
    known = _users_with_scram(admin, users, timeout=timeout)
    done = []
    for user in users:
        stored = read_credentials(directory, user)
        if stored is not None and user in known:
            continue
        credentials = stored or DevCredentials(user, secrets.token_urlsafe(24))
        path = store_credentials(directory, credentials)
        upsert = UserScramCredentialUpsertion(
            user,
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS),
            credentials.password.encode(),
        )
        [future] = admin.alter_user_scram_credentials([upsert], request_timeout=timeout).values()
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            raise SagalogError(
                f"creating the SCRAM user {user} failed: {exc.args[0].str()}"
            ) from exc
        report(f"done: SCRAM-SHA-512 user {user} (password in {path}, mode 0600)")
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
        if ScramMechanism.SCRAM_SHA_512 in mechanisms:
            found.add(user)
    return found
