"""API keys: several may be valid at once, so a key is rotated without downtime.

A missing key is 401 (say who you are), a wrong one 403 (you are not let in). Keys
are compared in constant time against every configured key, so the answer's timing
does not tell how much of a guess was right.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence

from sagalog.services.gateway.exceptions import MissingApiKey, WrongApiKey

HEADER = "X-API-Key"


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
