"""The tracker's topic names come from one module, and every reader of them agrees."""

from __future__ import annotations

import pytest

from sagalog.replay.settings import ReplaySettings
from sagalog.topic_names import (
    assignor_topic,
    changelog_topic,
    owned_prefix,
    records_changelog,
)
from sagalog.topology.services import GatewayService, TrackerService
from sagalog.tracker.tables import Table
from sagalog.tracker.ticks import clock_topic


def test_the_records_changelog_is_the_changelog_of_the_records_table() -> None:
    assert records_changelog("app-1") == changelog_topic("app-1", Table.RECORDS)
    assert records_changelog("app-1") == "app-1-records-changelog"  # what faust names it


@pytest.mark.parametrize(
    "topic",
    [
        *(changelog_topic("app-1", table) for table in Table),
        assignor_topic("app-1"),
        clock_topic("app-1"),
    ],
)
def test_every_topic_the_tracker_owns_lies_under_its_prefix(topic: str) -> None:
    """The ACLs grant the tracker ``<app id>-`` as a prefix: a name outside it is denied."""
    assert topic.startswith(owned_prefix("app-1"))
    tracker = TrackerService(name="saga-tracker", kind="tracker", app_id="app-1")
    assert topic.startswith(tracker.topic_prefix)


def test_the_gateway_the_topology_and_a_replay_follow_the_same_changelog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sagalog.services.gateway.settings import GatewaySettings

    monkeypatch.setenv("SAGALOG_TRACKER_APP_ID", "app-1")
    monkeypatch.setenv("GATEWAY_TRACKER_APP_ID", "app-1")
    gateway = GatewayService(name="gateway", kind="gateway", tracker_app_id="app-1")
    followed = {
        gateway.records_changelog,
        GatewaySettings(_env_file=None).records_changelog,  # type: ignore[call-arg]
        ReplaySettings(_env_file=None).changelog_topic,  # type: ignore[call-arg]
    }
    assert followed == {records_changelog("app-1")}
