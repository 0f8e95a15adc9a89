"""Passwords of the secure stack: generated at random, kept in the state directory, 0600.

The one store of the stack's SCRAM passwords. The admin's is made before the first
node is formatted (its SCRAM credential is seeded into the metadata by ``kafka-storage
format --add-scram``); a service's is made the first time anyone asks for it, either
``sagalog dev env --principal NAME`` or ``sagalog topology apply --dev-users`` (which
creates the SCRAM user on the brokers with it), so the two always agree. Nothing here
prints or logs a password: the only place one is shown is ``sagalog dev env`` (and
``up``'s exports), for ``eval``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from sagalog.devstack.certificates import check_principal_name, write_private

ADMIN = "admin"
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: Kafka's floor for SCRAM-SHA-512, for every user of the stack (the seeded admin and
#: the services' users alike); more costs every connect.
SCRAM_ITERATIONS = 4096


@dataclass(frozen=True)
class ScramCredential:
    """A SCRAM-SHA-512 user and its password (never in ``repr``)."""

    username: str
    password: SecretStr


class CredentialStore:
    """Password files under ``directory`` (``<state_dir>/security/passwords``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, name: str) -> Path:
        """The file holding the password of ``name``."""
        return self.directory / check_principal_name(name)

    def credential(self, name: str) -> ScramCredential:
        """The password of ``name``, generated on first use.

        32 random bytes, URL-safe base64: no ``,``, ``=``, ``]`` or quotes, which the
        ``--add-scram`` argument and a JAAS line would have to escape.
        """
        path = self.path(name)
        if not path.is_file():
            write_private(path, secrets.token_urlsafe(32).encode("ascii"))
        return ScramCredential(
            username=name, password=SecretStr(path.read_text(encoding="ascii").strip())
        )

    def admin(self) -> ScramCredential:
        """The super user: brokers' ACLs do not apply to it."""
        return self.credential(ADMIN)

    def existing(self, name: str) -> ScramCredential | None:
        """The password of ``name`` if one was made; never creates one."""
        path = self.path(name)
        if not path.is_file():
            return None
        return ScramCredential(
            username=name, password=SecretStr(path.read_text(encoding="ascii").strip())
        )
