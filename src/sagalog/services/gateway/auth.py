"""API keys: several may be valid at once, so a key is rotated without downtime.

A missing key is 401 (say who you are), a wrong one 403 (you are not let in). Keys
are compared in constant time against every configured key, so the answer's timing
does not tell how much of a guess was right.

A key has a role: an *operator* key (``GATEWAY_API_KEYS``) reads and acts; a
*reader* key (``GATEWAY_READ_ONLY_API_KEYS``) sees everything the operator sees and
acts on nothing, so a dashboard or an auditor can be given one without the power to
decide a gate. The role is looked up on every request, never remembered by a client.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sagalog.services.gateway.exceptions import MissingApiKey, ReadOnlyKey, WrongApiKey

HEADER = "X-API-Key"


class Role(enum.StrEnum):
    OPERATOR = "operator"
    READER = "reader"


@dataclass(frozen=True)
class ApiKeys:
    """The keys a gateway accepts, by role."""

    operators: tuple[bytes, ...]
    readers: tuple[bytes, ...] = ()

    def role_of(self, given: str | None) -> Role:
        """The role of ``given``.

        Raises:
            MissingApiKey: nothing was given (401).
            WrongApiKey: it matches no key (403).
        """
        check_api_key(given, [*self.operators, *self.readers])
        assert given is not None
        # Both lists compared whole: the timing says nothing of which list holds it.
        operator = matches_any(given.encode("utf-8", "replace"), self.operators)
        return Role.OPERATOR if operator else Role.READER

    def by_role(self) -> Iterable[tuple[bytes, Role]]:
        yield from ((key, Role.OPERATOR) for key in self.operators)
        yield from ((key, Role.READER) for key in self.readers)


def require_operator(role: Role, *, action: str) -> None:
    """Let an operator act; refuse a reader.

    Raises:
        ReadOnlyKey: ``role`` is a reader's (403).
    """
    if role is not Role.OPERATOR:
        raise ReadOnlyKey(
            f"{action} needs an operator key: this key is read-only (GATEWAY_READ_ONLY_API_KEYS), "
            "it sees everything and acts on nothing. Use a key from GATEWAY_API_KEYS",
            action=action,
        )


def matches_any(candidate: bytes, secrets: Iterable[bytes]) -> bool:
    """Whether ``candidate`` equals one of ``secrets``, in time that tells nothing of which
    (or how much of a guess was right): every one is compared, in constant time."""
    matched = False
    for secret in secrets:  # no early exit
        matched |= hmac.compare_digest(candidate, secret)
    return matched


def check_api_key(given: str | None, keys: Sequence[bytes]) -> None:
    """Accept ``given`` if it is one of ``keys``.

    Raises:
        MissingApiKey: nothing was given (401).
        WrongApiKey: it matches no key (403).
    """
    if not given:
        raise MissingApiKey(
            f"this endpoint needs an API key: send it in the {HEADER} header "
            "(the gateway's operator sets the valid keys in GATEWAY_API_KEYS)"
        )
    if not matches_any(given.encode("utf-8", "replace"), keys):
        raise WrongApiKey(
            f"the API key in {HEADER} is not valid for this gateway; check for a typo or a "
            "rotated key, and ask the gateway's operator for a current one"
        )
