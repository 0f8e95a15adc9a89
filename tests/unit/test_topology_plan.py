"""The plan is a pure function of the files and the cluster's state."""

from __future__ import annotations

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.topology.model import TopicSpec, Topology
from sagalog.topology.plan import ChangeKind, SubjectState, TopicState, plan_schemas, plan_topics

EVENTS = TopicSpec(
    name="shop.events",
    partitions=6,
    retention="forever",  # type: ignore[arg-type]
    schemas=("sagalog.v1.StepFailed",),
)
TOPOLOGY = Topology(topics=(EVENTS,), ignore=("_*", "tracker-*"))
MATCHING = TopicState(
    name="shop.events",
    partitions=6,
    replication_factor=1,
    config={"cleanup.policy": "delete", "retention.ms": "-1"},
)


def kinds(changes: list) -> list[tuple[ChangeKind, str, bool]]:  # type: ignore[type-arg]
    return [(c.kind, c.target, c.needs_force) for c in changes]


def test_missing_topic_is_created() -> None:
    assert kinds(plan_topics(TOPOLOGY, {})) == [(ChangeKind.CREATE_TOPIC, "shop.events", False)]


def test_matching_cluster_needs_nothing() -> None:
    assert plan_topics(TOPOLOGY, {"shop.events": MATCHING}) == []


def test_config_drift_is_altered_without_force() -> None:
    drifted = TopicState(
        name="shop.events",
        partitions=6,
        replication_factor=1,
        config={"cleanup.policy": "delete", "retention.ms": "604800000"},
    )
    [change] = plan_topics(TOPOLOGY, {"shop.events": drifted})
    assert (change.kind, change.needs_force) == (ChangeKind.ALTER_CONFIG, False)
    assert change.config == {"retention.ms": "-1"}
    assert "retention.ms: 604800000 -> -1" in change.detail


def test_fewer_partitions_needs_force_and_says_why() -> None:
    wider = TopicState(
        name="shop.events", partitions=12, replication_factor=1, config=MATCHING.config
    )
    [change] = plan_topics(TOPOLOGY, {"shop.events": wider})
    assert (change.kind, change.needs_force) == (ChangeKind.RECREATE_TOPIC, True)
    assert "losing every event" in change.reason


def test_more_partitions_needs_force_because_keys_move() -> None:
    narrower = TopicState(
        name="shop.events", partitions=3, replication_factor=1, config=MATCHING.config
    )
    [change] = plan_topics(TOPOLOGY, {"shop.events": narrower})
    assert (change.kind, change.needs_force) == (ChangeKind.ADD_PARTITIONS, True)
    assert "remap keys" in change.reason


def test_undeclared_topics_are_deleted_only_with_force_unless_ignored() -> None:
    cluster = {
        "shop.events": MATCHING,
        "old.events": TopicState(name="old.events", partitions=1, replication_factor=1),
        "tracker-table-changelog": TopicState(
            name="tracker-table-changelog", partitions=1, replication_factor=1
        ),
        "_schemas": TopicState(name="_schemas", partitions=1, replication_factor=1),
    }
    assert kinds(plan_topics(TOPOLOGY, cluster)) == [(ChangeKind.DELETE_TOPIC, "old.events", True)]


def test_replication_change_is_reported_not_applied() -> None:
    spec = EVENTS.model_copy(update={"replication_factor": 3})
    [change] = plan_topics(Topology(topics=(spec,)), {"shop.events": MATCHING})
    assert change.kind is ChangeKind.UNSUPPORTED and "reassign" in change.reason


def test_schemas_registered_with_the_rule(catalog: SchemaCatalog) -> None:
    subject = "shop.events-sagalog.v1.StepFailed"
    fresh = plan_schemas(TOPOLOGY, {}, catalog)
    assert kinds(fresh) == [
        (ChangeKind.SET_COMPATIBILITY, subject, False),
        (ChangeKind.REGISTER_SCHEMA, subject, False),
    ]
    current = SubjectState(
        definition=catalog["sagalog.v1.StepFailed"].definition, compatibility="FULL_TRANSITIVE"
    )
    assert plan_schemas(TOPOLOGY, {subject: current}, catalog) == []
    older = SubjectState(
        definition={"type": "record", "name": "StepFailed", "fields": []},
        compatibility="FULL_TRANSITIVE",
    )
    [change] = plan_schemas(TOPOLOGY, {subject: older}, catalog)
    assert change.detail.endswith("(new version)")
