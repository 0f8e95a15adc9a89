"""Gate resumption tokens: HMAC-SHA256 bound to workflow, gate and attempt."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sagalog.errors import ConfigurationError
from sagalog.tracker import GateSecretError, gate_token, verify_gate_token
from sagalog.tracker.gates import MIN_SECRET_BYTES

SECRET = b"unit-test-gate-secret-32-bytes!!"


def test_a_token_is_deterministic_and_url_safe() -> None:
    token = gate_token(SECRET, "wf-1", "manager_approval", 1)
    assert token == gate_token(SECRET, "wf-1", "manager_approval", 1)
    assert re.fullmatch(r"g1\.[A-Za-z0-9_-]{43}", token)
    assert verify_gate_token(SECRET, token, workflow_id="wf-1", gate="manager_approval", attempt=1)


@pytest.mark.parametrize(
    ("workflow_id", "gate", "attempt"),
    [("wf-2", "manager_approval", 1), ("wf-1", "cfo_approval", 1), ("wf-1", "manager_approval", 2)],
)
def test_a_token_is_bound_to_its_workflow_gate_and_attempt(
    workflow_id: str, gate: str, attempt: int
) -> None:
    token = gate_token(SECRET, "wf-1", "manager_approval", 1)
    assert not verify_gate_token(SECRET, token, workflow_id=workflow_id, gate=gate, attempt=attempt)


def test_the_parts_cannot_be_shifted_into_one_another() -> None:
    """``("a|b", "c")`` and ``("a", "b|c")`` sign different messages."""
    assert gate_token(SECRET, "wf|x", "gate", 1) != gate_token(SECRET, "wf", "x|gate", 1)


def test_another_secret_gives_another_token() -> None:
    other = b"another-secret-of-32-bytes-long!"
    token = gate_token(other, "wf-1", "manager_approval", 1)
    assert not verify_gate_token(
        SECRET, token, workflow_id="wf-1", gate="manager_approval", attempt=1
    )


@pytest.mark.parametrize("junk", ["", "g1.", "é" * 40, "g1." + "A" * 43, "\x00"])
def test_junk_never_verifies_and_never_raises(junk: str) -> None:
    assert not verify_gate_token(SECRET, junk, workflow_id="wf-1", gate="g", attempt=1)


def test_a_short_secret_is_refused_as_a_configuration_error() -> None:
    with pytest.raises(GateSecretError, match="at least 16 random bytes") as caught:
        gate_token(b"secret", "wf-1", "g", 1)
    assert isinstance(caught.value, ConfigurationError)


def _tracker_check(secret: str) -> bytes:
    from sagalog.services.tracker.settings import TrackerSettings
    from sagalog.services.tracker.startup import check_secret

    return check_secret(TrackerSettings(_env_file=None, gate_secret=secret))  # type: ignore[call-arg]


def _replay_check(secret: str) -> bytes:
    from sagalog.replay.settings import ReplaySettings

    return ReplaySettings(_env_file=None, gate_secret=secret).secret()  # type: ignore[call-arg]


def _agent_check(secret: str) -> bytes:
    from pydantic import ValidationError

    with pytest.MonkeyPatch.context() as env:  # the module builds its settings on import
        env.setenv("PURCHASING_AGENT_GATE_SECRET", SECRET.decode())
        from purchasing_agent.agent import PurchasingAgentSettings

    try:
        settings = PurchasingAgentSettings(_env_file=None, gate_secret=secret)  # type: ignore[call-arg]
    except ValidationError as exc:
        raise GateSecretError(str(exc)) from exc
    return settings.gate_secret.get_secret_value().encode()


@pytest.mark.parametrize(
    ("check", "setting"),
    [
        (_tracker_check, "SAGALOG_TRACKER_GATE_SECRET"),
        (_replay_check, "SAGALOG_TRACKER_GATE_SECRET"),
        (_agent_check, "PURCHASING_AGENT_GATE_SECRET"),
    ],
)
def test_every_holder_of_the_secret_applies_the_one_rule_and_names_its_setting(
    check: Any, setting: str
) -> None:
    """15 bytes are refused and 16 accepted by each: the limit is ``MIN_SECRET_BYTES``."""
    with pytest.raises(GateSecretError, match=f"{setting} is unset or shorter than 16 bytes"):
        check("x" * (MIN_SECRET_BYTES - 1))
    assert check("x" * MIN_SECRET_BYTES) == b"x" * MIN_SECRET_BYTES
