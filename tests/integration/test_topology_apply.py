"""`sagalog topology apply` against the real cluster: idempotent, and careful."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from sagalog.cli.main import cli
from sagalog.cluster import connect_admin
from sagalog.errors import DestructiveChangeRefused
from sagalog.settings import ClientSettings
from sagalog.topology.acl_apply import NOT_ENFORCED
from sagalog.topology.plan import ChangeKind

from .project import REPO, Project


def partitions(project: Project, topic: str) -> int:
    _, metadata = connect_admin(project.settings)
    return len(metadata.topics[topic].partitions)


def run(project: Project, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--project-dir", str(project.root), *args])
    return result.exit_code, result.output


def test_apply_twice_second_run_changes_nothing(project: Project) -> None:
    code, output = run(project, "topology", "apply")
    assert code == 0, output
    topic = project.topic("procurement.events")
    assert f"create topic {topic}: 3 partitions" in output
    assert f"register schema {topic}-procurement.v1.RequestSubmitted" in output
    assert partitions(project, topic) == 3

    code, output = run(project, "topology", "apply")
    assert (code, output.strip()) == (0, "nothing to change: the cluster matches the topology")
    code, _ = run(project, "topology", "plan", "--detailed-exitcode")
    assert code == 0

    registry = project.client().registry
    subject = f"{topic}-procurement.v1.RequestSubmitted"
    assert registry.compatibility(subject) == "FULL_TRANSITIVE"


def test_config_drift_is_planned_and_repaired(project: Project) -> None:
    project.apply()
    topic = project.topic("procurement.events")
    admin, _ = connect_admin(project.settings)
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)

    code, output = run(project, "topology", "plan", "--detailed-exitcode")
    assert code == 10
    assert f"alter config {topic}: retention.ms: 3600000 -> -1" in output
    project.apply()
    assert project.client().plan(project.topology()).empty


def test_destructive_changes_are_refused_without_force(project: Project) -> None:
    project.apply()
    topic = project.topic("procurement.events")
    project.write_topology(f"""
ignore: ["*"]
topics:
  {topic}: {{partitions: 1, retention: forever}}
""")
    with pytest.raises(DestructiveChangeRefused, match="Kafka cannot remove partitions"):
        project.apply()
    assert partitions(project, topic) == 3  # nothing was changed

    code, output = run(project, "topology", "apply")
    assert code == 4
    assert "refused 1 change(s) that need --force (0 other change(s) applied)" in output

    done = project.apply(force=True)
    assert [c.kind for c in done] == [ChangeKind.RECREATE_TOPIC]  # type: ignore[attr-defined]
    assert partitions(project, topic) == 1


def test_more_partitions_and_undeclared_topics_need_force(project: Project) -> None:
    project.apply()
    topic = project.topic("procurement.events")
    extra = project.topic("leftover")
    project.write_topology(f"""
ignore: ["*"]
topics:
  {topic}: {{partitions: 4, retention: forever}}
  {extra}: {{partitions: 1}}
""")
    project.apply(force=True)
    project.write_topology(f"""
ignore: ["[!{extra[0]}]*"]
topics:
  {topic}: {{partitions: 4, retention: forever}}
""")
    plan = project.client().plan(project.topology())
    refused = [(c.kind, c.target) for c in plan.refused_without_force]
    assert (ChangeKind.DELETE_TOPIC, extra) in refused
    assert {kind for kind, _ in refused} == {ChangeKind.DELETE_TOPIC}


def test_safe_changes_are_made_even_when_a_stray_topic_is_refused(project: Project) -> None:
    stray, fresh = project.topic("stray"), project.topic("fresh")
    project.write_topology(f'ignore: ["*"]\ntopics:\n  {stray}: {{partitions: 1}}')
    project.apply()
    # Now every undeclared topic is a deletion candidate, this test's stray among them:
    # all are refused (never --force here: it would empty the shared cluster).
    project.write_topology(f"ignore: []\ntopics:\n  {fresh}: {{partitions: 2}}")
    with pytest.raises(DestructiveChangeRefused) as caught:
        project.apply()
    assert f"delete topic {stray}" in str(caught.value)
    assert "(1 other change(s) applied)" in str(caught.value)
    _, metadata = connect_admin(project.settings)
    assert fresh in metadata.topics and stray in metadata.topics


def test_the_plain_dev_stack_skips_acls(settings: ClientSettings) -> None:
    """Read-only against the shared PLAINTEXT stack: no authorizer, so no ACL is planned."""
    result = CliRunner().invoke(cli, ["--project-dir", str(REPO), "topology", "plan"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(NOT_ENFORCED)
    assert "acl" not in result.output.replace(NOT_ENFORCED, "").lower()
