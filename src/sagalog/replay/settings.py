"""The live tracker's settings a replay must share to decide as it did.

A replay decides with the tracker's code, but code alone does not fix a decision:
the gate secret decides whether a recorded ``GateDecided`` verifies (with another
one every person's decision reads as forged), the compensation retry policy when a
stuck compensation is given up, the admission limits which workflow waits. So a
replay reads them from the tracker's own environment variables
(``SAGALOG_TRACKER_*``, or ``.env``), the ones the tracker's deployment already sets;
``tests/unit/test_replay_settings.py`` fails if these defaults drift from the
tracker's (``sagalog.services.tracker.settings.TrackerSettings``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from sagalog.topic_names import records_changelog
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.gates import checked_secret


class ReplaySettings(BaseSettings):
    """What a replay shares with the tracker it replays (env prefix ``SAGALOG_TRACKER_``)."""

    model_config = SettingsConfigDict(
        env_prefix="SAGALOG_TRACKER_", env_file=".env", extra="ignore"
    )

    app_id: str = Field(
        default="saga-tracker",
        description="The tracker's application id: its records changelog is "
        "<app id>-records-changelog.",
    )
    gate_secret: SecretStr = Field(
        default=SecretStr(""), description="The tracker's gate-token key (required)."
    )
    transitions_topic: str = "sagalog.transitions"
    flows_dir: Path | None = None
    admission: dict[str, int] = Field(default_factory=dict)
    compensation_attempts: int = Field(default=5, ge=1)
    compensation_max_wait_s: float = Field(default=86_400.0, gt=0)

    @property
    def changelog_topic(self) -> str:
        return records_changelog(self.app_id)

    def secret(self) -> bytes:
        """The gate secret as the rules take it.

        Raises:
            GateSecretError: it is unset or too short to be the tracker's (a
                ``ConfigurationError``).
        """
        return checked_secret(
            self.gate_secret,
            setting="SAGALOG_TRACKER_GATE_SECRET",
            remedy="set it to the tracker's own secret, or every recorded gate decision "
            "reads as forged",
        )

    def retry(self) -> CompensationRetry:
        return CompensationRetry(
            max_attempts=self.compensation_attempts,
            max_wait_ms=int(self.compensation_max_wait_s * 1000),
        )
