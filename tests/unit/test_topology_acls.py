"""Services as principals and their ACLs: loaded and checked, derived and planned purely."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    ScramMechanism,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)

from sagalog.authorization import authorization_error, principal_of
from sagalog.cli.main import cli
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.devstack.credentials import SCRAM_ITERATIONS, CredentialStore
from sagalog.devstack.shape import StackShape, write_shape
from sagalog.errors import AuthorizationError, ConfigurationError, TopologyError
from sagalog.flows.loader import load_flows
from sagalog.flows.model import Flow
from sagalog.settings import ClientSettings
from sagalog.topology.acl_apply import current_acls, from_binding, to_binding
from sagalog.topology.acl_plan import plan_acls
from sagalog.topology.acls import (
    AclRule,
    Operation,
    PatternKind,
    Permission,
    ResourceKind,
    derive_acls,
)
from sagalog.topology.dev_users import ensure_dev_users, user_of
from sagalog.topology.loader import load_topology
from sagalog.topology.model import Topology
from sagalog.topology.plan import ChangeKind
from sagalog.topology.services import AgentService

TOPIC, GROUP, TXN = ResourceKind.TOPIC, ResourceKind.GROUP, ResourceKind.TRANSACTIONAL_ID
LIT, PRE = PatternKind.LITERAL, PatternKind.PREFIXED
R, W, C, D = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE


@pytest.fixture(scope="module")
def procurement(repo_root: Path, catalog: SchemaCatalog) -> tuple[Topology, tuple[Flow, ...]]:
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    flows = tuple(load_flows(repo_root / "topology" / "flows", catalog=catalog, topology=topology))
    return topology, flows


def rights(rules: tuple[AclRule, ...], principal: str) -> set[tuple[str, str, str, str]]:
    return {
        (r.resource_type.value, r.pattern_type.value, r.resource_name, r.operation.value)
        for r in rules
        if r.principal == principal
    }


def topology_dir(tmp_path: Path, services: str) -> Path:
    (tmp_path / "topics.yaml").write_text(
        "topics:\n  shop.events: {}\n  sagalog.deadletter: {}\n  extra.events: {}\n"
    )
    (tmp_path / "services.yaml").write_text(services)
    return tmp_path


# -- the declaration ------------------------------------------------------------------


def test_the_repository_declares_every_procurement_service(
    procurement: tuple[Topology, tuple[Flow, ...]],
) -> None:
    topology, flows = procurement
    names = {s.name for s in topology.services}
    assert names == {
        "saga-tracker",
        "gateway",
        *(step.agent for flow in flows for step in flow.steps),
    }
    agent = topology.service("budget-agent")
    assert isinstance(agent, AgentService)
    assert (agent.principal, agent.group, agent.transactional_id_prefix) == (
        "User:budget-agent",
        "sagalog-agent-budget-agent",
        "sagalog-agent-budget-agent-",
    )
    assert agent.retry_topic == "sagalog.agent.budget-agent.retry"
    assert agent.claims_topic == "sagalog.agent.budget-agent.claims"


@pytest.mark.parametrize(
    ("services", "message"),
    [
        (
            "services:\n  a: {kind: agnt}\n",
            "service 'a', field 'kind': say agent, tracker or gateway (got 'agnt')",
        ),
        (
            "services:\n  a: {kind: agent, principal: alice}\n",
            "service 'a', field 'principal': Value error, 'alice' is not a Kafka principal",
        ),
        ("services:\n  a: {kind: agent, group_id: x}\n", "service 'a', field 'group_id': unknown"),
        (
            "services:\n  a: {kind: agent, reads: [nowhere.events]}\n",
            "service 'a', field 'reads': topic 'nowhere.events' is not declared",
        ),
        (
            "services:\n  g: {kind: gateway, tracker_app_id: t}\n",
            "service 'g', field 'tracker_app_id': no tracker with app id 't'",
        ),
        (
            "services:\n  g: {kind: gateway}\n",
            "service 'g', field 'tracker_app_id': Field required",
        ),
        ("services: [a]\n", "'services' must be a mapping"),
    ],
)
def test_a_wrong_declaration_names_file_entry_and_field(
    tmp_path: Path, services: str, message: str
) -> None:
    with pytest.raises(TopologyError) as caught:
        load_topology(topology_dir(tmp_path, services))
    assert str(caught.value).startswith(str(tmp_path / "services.yaml"))
    assert message in str(caught.value)


def test_a_service_declared_twice_is_refused(tmp_path: Path) -> None:
    directory = topology_dir(tmp_path, "services:\n  a: {kind: agent}\n")
    (directory / "more.yaml").write_text("services:\n  a: {kind: agent}\n")
    with pytest.raises(TopologyError, match="service 'a': already declared in"):
        load_topology(directory)


def test_defaults_follow_the_name_and_can_be_overridden(tmp_path: Path) -> None:
    topology = load_topology(
        topology_dir(
            tmp_path,
            "services:\n  t: {kind: tracker}\n"
            "  a: {kind: agent, principal: 'User:CN=a,O=shop', group: custom}\n",
        )
    )
    tracker, agent = topology.service("t"), topology.service("a")
    assert tracker is not None and tracker.kind == "tracker" and tracker.app_id == "t"
    assert isinstance(agent, AgentService)
    assert (agent.principal, agent.group) == ("User:CN=a,O=shop", "custom")
    assert topology.principals == {"User:t", "User:CN=a,O=shop"}


# -- the derivation --------------------------------------------------------------------


def test_an_agent_gets_exactly_its_flow_topic_group_retry_topic_and_transactions(
    procurement: tuple[Topology, tuple[Flow, ...]],
) -> None:
    rules = derive_acls(*procurement)
    assert rights(rules, "User:intake-agent") == {
        ("TOPIC", "LITERAL", "procurement.events", "READ"),
        ("TOPIC", "LITERAL", "procurement.events", "WRITE"),
        ("TOPIC", "LITERAL", "procurement.events", "DESCRIBE"),
        ("TOPIC", "LITERAL", "sagalog.agent.intake-agent.retry", "READ"),
        ("TOPIC", "LITERAL", "sagalog.agent.intake-agent.retry", "WRITE"),
        ("TOPIC", "LITERAL", "sagalog.agent.intake-agent.retry", "CREATE"),
        ("TOPIC", "LITERAL", "sagalog.agent.intake-agent.retry", "DESCRIBE"),
        ("TOPIC", "LITERAL", "sagalog.agent.intake-agent.claims", "READ"),
        ("TOPIC", "LITERAL", "sagalog.agent.intake-agent.claims", "WRITE"),
        ("TOPIC", "LITERAL", "sagalog.agent.intake-agent.claims", "CREATE"),
        ("TOPIC", "LITERAL", "sagalog.agent.intake-agent.claims", "DESCRIBE"),
        ("TOPIC", "LITERAL", "sagalog.stream.procurement.events", "WRITE"),
        ("TOPIC", "LITERAL", "sagalog.stream.procurement.events", "CREATE"),
        ("TOPIC", "LITERAL", "sagalog.stream.procurement.events", "DESCRIBE"),
        ("TOPIC", "LITERAL", "sagalog.deadletter", "WRITE"),
        ("TOPIC", "LITERAL", "sagalog.deadletter", "DESCRIBE"),
        ("GROUP", "LITERAL", "sagalog-agent-intake-agent", "READ"),
        ("GROUP", "PREFIXED", "sagalog-hydrate-", "DESCRIBE"),
        ("TRANSACTIONAL_ID", "PREFIXED", "sagalog-agent-intake-agent-", "WRITE"),
        ("TRANSACTIONAL_ID", "PREFIXED", "sagalog-agent-intake-agent-", "DESCRIBE"),
    }


def test_the_tracker_owns_its_prefix_and_writes_the_platform_topics(
    procurement: tuple[Topology, tuple[Flow, ...]],
) -> None:
    rules = derive_acls(*procurement)
    assert rights(rules, "User:saga-tracker") == {
        *(
            ("TOPIC", "LITERAL", topic, op)
            for topic in ("procurement.events", "filings.events")  # every flow's topic
            for op in ("READ", "WRITE", "DESCRIBE")
        ),
        *(
            ("TOPIC", "LITERAL", topic, op)
            for topic in ("sagalog.transitions", "sagalog.alerts", "sagalog.deadletter")
            for op in ("WRITE", "DESCRIBE")
        ),
        *(
            ("TOPIC", "PREFIXED", "saga-tracker-", op)
            for op in ("READ", "WRITE", "CREATE", "DESCRIBE")
        ),
        ("GROUP", "LITERAL", "saga-tracker", "READ"),
        ("GROUP", "PREFIXED", "saga-tracker-", "DESCRIBE"),
        ("GROUP", "LITERAL", "sagalog-clock", "DESCRIBE"),
        ("TRANSACTIONAL_ID", "PREFIXED", "saga-tracker-", "WRITE"),
        ("TRANSACTIONAL_ID", "PREFIXED", "saga-tracker-", "DESCRIBE"),
    }


def test_the_gateway_reads_the_read_model_and_never_writes_transitions(
    procurement: tuple[Topology, tuple[Flow, ...]],
) -> None:
    rules = derive_acls(*procurement)
    assert rights(rules, "User:gateway") == {
        ("TOPIC", "LITERAL", "saga-tracker-records-changelog", "READ"),
        ("TOPIC", "LITERAL", "saga-tracker-records-changelog", "DESCRIBE"),
        ("TOPIC", "LITERAL", "sagalog.transitions", "READ"),
        ("TOPIC", "LITERAL", "sagalog.transitions", "DESCRIBE"),
        ("TOPIC", "LITERAL", "procurement.events", "WRITE"),
        ("TOPIC", "LITERAL", "procurement.events", "READ"),  # dlq replay: earlier replays
        ("TOPIC", "LITERAL", "procurement.events", "DESCRIBE"),
        ("TOPIC", "LITERAL", "filings.events", "WRITE"),  # webhooks of filing workflows
        ("TOPIC", "LITERAL", "filings.events", "READ"),
        ("TOPIC", "LITERAL", "filings.events", "DESCRIBE"),
        ("TOPIC", "LITERAL", "sagalog.deadletter", "READ"),  # sagalog dlq
        ("TOPIC", "LITERAL", "sagalog.deadletter", "DESCRIBE"),
        ("GROUP", "PREFIXED", "sagalog-gateway-", "DESCRIBE"),
        ("TOPIC", "LITERAL", "sagalog.stream.procurement.events", "READ"),
        ("TOPIC", "LITERAL", "sagalog.stream.procurement.events", "DESCRIBE"),
        ("TOPIC", "LITERAL", "sagalog.stream.filings.events", "READ"),
        ("TOPIC", "LITERAL", "sagalog.stream.filings.events", "DESCRIBE"),
    }


def test_deny_by_default_nothing_beyond_the_derivation(
    procurement: tuple[Topology, tuple[Flow, ...]],
) -> None:
    rules = derive_acls(*procurement)
    # 153, each of 9 agents' claims topic (4 each), and the model streams: each agent
    # creates and writes its flow's (3 each), the gateway reads both flows' (2 each).
    assert len(rules) == 220
    assert all(r.permission is Permission.ALLOW and r.host == "*" for r in rules)
    assert not [r for r in rules if r.resource_type is ResourceKind.CLUSTER]  # KIP-679
    assert not [r for r in rules if r.operation in (Operation.ALL, Operation.DELETE)]
    assert not [r for r in rules if r.resource_name in ("*", "")]
    # No agent reads another's retry or claims topic.
    for rule in rules:
        if rule.resource_name.startswith("sagalog.agent."):
            own = f"sagalog.agent.{rule.principal[5:]}."
            assert rule.resource_name in (f"{own}retry", f"{own}claims")
    assert all(r.why for r in rules)
    assert list(rules) == sorted(rules)


def test_declared_reads_and_writes_add_to_the_flows(tmp_path: Path) -> None:
    topology = load_topology(
        topology_dir(
            tmp_path,
            "services:\n  a: {kind: agent, reads: [extra.events], writes: [extra.events]}\n",
        )
    )
    rules = derive_acls(topology, ())
    assert {("TOPIC", "LITERAL", "extra.events", op) for op in ("READ", "WRITE", "DESCRIBE")} <= (
        rights(rules, "User:a")
    )


def test_a_flow_step_of_an_agent_not_in_the_topology_is_an_error(
    procurement: tuple[Topology, tuple[Flow, ...]],
) -> None:
    topology, flows = procurement
    without = topology.model_copy(
        update={"services": tuple(s for s in topology.services if s.name != "risk-agent")}
    )
    with pytest.raises(
        TopologyError, match="step 'score_risk': agent 'risk-agent' is not a service of the"
    ):
        derive_acls(without, flows)


def test_an_agent_with_nothing_to_read_is_an_error(tmp_path: Path) -> None:
    topology = load_topology(topology_dir(tmp_path, "services:\n  lonely: {kind: agent}\n"))
    with pytest.raises(TopologyError, match="service 'lonely': no flow step names this agent"):
        derive_acls(topology, ())


def test_no_services_no_acls(procurement: tuple[Topology, tuple[Flow, ...]]) -> None:
    topology, flows = procurement
    assert derive_acls(topology.model_copy(update={"services": ()}), flows) == ()


# -- the plan --------------------------------------------------------------------------


def rule(principal: str, name: str, op: Operation, **kw: object) -> AclRule:
    return AclRule(principal, TOPIC, LIT, name, op, **kw)  # type: ignore[arg-type]


def test_missing_bindings_are_created_and_matching_ones_left() -> None:
    desired = [rule("User:a", "t", R, why="reads t"), rule("User:a", "t", W)]
    changes = plan_acls(desired, [rule("User:a", "t", W)], principals={"User:a"})
    assert [(c.kind, c.target, c.acl, c.needs_force) for c in changes] == [
        (ChangeKind.CREATE_ACL, "User:a", desired[0], False)
    ]
    assert (
        changes[0].describe() == "+ create acl User:a: ALLOW READ on TOPIC LITERAL 't'  # reads t"
    )
    assert plan_acls(desired, desired, principals={"User:a"}) == []


def test_an_underived_binding_of_a_declared_principal_needs_force() -> None:
    extra = rule("User:a", "secret", R)
    deny = rule("User:a", "t", W, permission=Permission.DENY)
    changes = plan_acls([], [extra, deny], principals={"User:a"})
    assert [(c.kind, c.acl, c.needs_force) for c in changes] == [
        (ChangeKind.DELETE_ACL, extra, True),
        (ChangeKind.DELETE_ACL, deny, True),
    ]
    assert "not derived from the topology" in changes[0].reason
    assert "widens" in changes[1].reason and "widens" not in changes[0].reason
    assert changes[0].describe().startswith("- delete acl User:a: ALLOW READ on TOPIC LITERAL")


def test_bindings_of_undeclared_principals_are_left_alone() -> None:
    theirs = [rule("User:ops", "t", R), rule("User:admin", "t", W)]
    assert plan_acls([], theirs, principals={"User:a"}) == []


def test_host_and_pattern_are_part_of_a_binding() -> None:
    derived = rule("User:a", "t", R)
    other_host = rule("User:a", "t", R, host="10.0.0.1")
    prefixed = AclRule("User:a", TOPIC, PRE, "t", R)
    changes = plan_acls([derived], [derived, other_host, prefixed], principals={"User:a"})
    assert {c.acl for c in changes} == {other_host, prefixed}
    assert "from host 10.0.0.1" in other_host.describe()


# -- dev users and the authorization error ---------------------------------------------


class ScramAdmin:
    """The two SCRAM calls of ``AdminClient``, over a dict of user -> upsertion."""

    def __init__(self) -> None:
        self.users: dict[str, UserScramCredentialUpsertion] = {}

    def describe_user_scram_credentials(
        self, users: list[str], request_timeout: float
    ) -> dict[str, Future[Any]]:
        answers: dict[str, Future[Any]] = {}
        for user in users:
            answers[user] = Future()
            if user in self.users:
                info = self.users[user].scram_credential_info
                answers[user].set_result(UserScramCredentialsDescription(user, [info]))
            else:
                missing = KafkaError(KafkaError.RESOURCE_NOT_FOUND, "no such user")
                answers[user].set_exception(KafkaException(missing))
        return answers

    def alter_user_scram_credentials(
        self, alterations: list[UserScramCredentialUpsertion], request_timeout: float
    ) -> dict[str, Future[None]]:
        done: dict[str, Future[None]] = {}
        for upsert in alterations:
            self.users[upsert.user] = upsert
            done[upsert.user] = Future()
            done[upsert.user].set_result(None)
        return done


def test_dev_users_get_the_dev_stacks_passwords_once(tmp_path: Path) -> None:
    """The password ``sagalog dev env --principal`` shows is the one the brokers get,
    whichever ran first; a second run changes nothing; a lost password is replaced."""
    store = CredentialStore(tmp_path / "passwords")
    shown_before = store.credential("intake-agent").password.get_secret_value()  # dev env
    admin = ScramAdmin()
    lines: list[str] = []
    principals = ["User:intake-agent", "User:gateway", "User:intake-agent"]
    created = ensure_dev_users(admin, principals, store, timeout=1, report=lines.append)  # type: ignore[arg-type]
    assert created == ["gateway", "intake-agent"]
    assert admin.users["intake-agent"].password == shown_before.encode()
    gateway = store.existing("gateway")
    assert gateway is not None
    assert admin.users["gateway"].password == gateway.password.get_secret_value().encode()
    info = admin.users["gateway"].scram_credential_info
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    assert lines[0] == (
        "done: SCRAM-SHA-512 user gateway (password: `sagalog dev env --principal gateway`)"
    )
    assert not any(shown_before in line for line in lines)

    assert ensure_dev_users(admin, principals, store, timeout=1, report=lines.append) == []  # type: ignore[arg-type]
    store.path("gateway").unlink()
    assert ensure_dev_users(admin, principals, store, timeout=1, report=lines.append) == [  # type: ignore[arg-type]
        "gateway"
    ]
    renewed = store.existing("gateway")
    assert renewed is not None and renewed != gateway
    assert admin.users["gateway"].password == renewed.password.get_secret_value().encode()


def test_only_user_principals_get_a_scram_user() -> None:
    assert user_of("User:intake-agent") == "intake-agent"
    for principal in ("Group:ops", "User:", "intake-agent"):
        with pytest.raises(ConfigurationError, match="is not User:<name>"):
            user_of(principal)


def test_authorization_error_names_principal_operation_and_resource() -> None:
    settings = ClientSettings(
        bootstrap_servers="broker:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="intake-agent",
        sasl_password="x",  # type: ignore[arg-type]
    )
    error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed")
    failure = authorization_error(settings, error, operation="WRITE", resource="sagalog.alerts")
    assert isinstance(failure, AuthorizationError) and failure.exit_code == 6
    assert str(failure).startswith(
        "User:intake-agent may not WRITE topic 'sagalog.alerts' on broker:9093 "
        "(TOPIC_AUTHORIZATION_FAILED"
    )
    assert "sagalog topology apply" in str(failure)
    assert principal_of(ClientSettings()) == "User:ANONYMOUS"
    group = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert "may not READ group 'g'" in str(
        authorization_error(settings, group, operation="READ", resource="g")
    )


def test_cli_lists_the_derived_bindings_without_a_cluster(repo_root: Path) -> None:
    result = CliRunner().invoke(cli, ["--project-dir", str(repo_root), "topology", "acls"])
    assert result.exit_code == 0, result.output
    assert "User:gateway\n  ALLOW DESCRIBE on GROUP PREFIXED 'sagalog-gateway-'" in result.output
    assert result.output.rstrip().endswith("220 binding(s) for 11 service(s)")


# -- reading the cluster's ACLs ---------------------------------------------------------


class _Done:
    def __init__(self, value: Any = None, error: KafkaError | None = None) -> None:
        self.value, self.error = value, error

    def result(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise KafkaException(self.error)
        return self.value


class _Entry:
    def __init__(self, value: str) -> None:
        self.value = value


class _Admin:
    """describe_acls and describe_configs answered as a broker would."""

    def __init__(self, acls: _Done, authorizer: str) -> None:
        self.answer, self.authorizer = acls, authorizer

    def describe_acls(self, acl_filter: Any, request_timeout: float) -> _Done:
        return self.answer

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, _Done]:
        return {resources[0]: _Done({"authorizer.class.name": _Entry(self.authorizer)})}


def test_acls_read_back_as_the_rules_they_were_made_from() -> None:
    made = rule("User:a", "t", R)
    admin = _Admin(_Done([to_binding(made)]), "org.apache.kafka.metadata.authorizer.X")
    assert current_acls(admin, broker_ids=[1], timeout=1) == [made]  # type: ignore[arg-type]
    assert from_binding(to_binding(made)) == made


def test_a_cluster_without_an_authorizer_has_no_acls_to_plan() -> None:
    disabled = _Done(error=KafkaError(KafkaError.SECURITY_DISABLED))
    assert current_acls(_Admin(disabled, ""), broker_ids=[1], timeout=1) is None  # type: ignore[arg-type]
    # confluent-kafka 2.16 answers SECURITY_DISABLED with an empty list: ask the broker.
    assert current_acls(_Admin(_Done([]), ""), broker_ids=[1], timeout=1) is None  # type: ignore[arg-type]
    enforced = _Admin(_Done([]), "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert current_acls(enforced, broker_ids=[1], timeout=1) == []  # type: ignore[arg-type]


def test_dev_users_are_refused_unless_the_dev_stack_is_secure_and_the_target(
    repo_root: Path, tmp_path: Path
) -> None:
    """Checked before any cluster is asked: a plaintext stack has no SCRAM users, and
    the dev stack's passwords belong on the dev stack's brokers only."""
    plain = {"SAGALOG_DEV_STATE_DIR": str(tmp_path / "plain"), "SAGALOG_DEV_KAFKA_PORT": "47192"}
    arguments = ["--project-dir", str(repo_root), "topology", "apply", "--dev-users"]
    result = CliRunner().invoke(cli, arguments, env=plain)
    assert result.exit_code == 2, result.output  # ConfigurationError
    assert "--dev-users needs a secure dev stack" in result.output
    assert f"the dev stack in {tmp_path / 'plain'} is plaintext" in result.output

    secure = tmp_path / "secure"
    write_shape(secure, StackShape(brokers=1, secure=True))
    elsewhere = {
        "SAGALOG_DEV_STATE_DIR": str(secure),
        "SAGALOG_DEV_KAFKA_PORT": "47192",
        "SAGALOG_BOOTSTRAP_SERVERS": "kafka.example.com:9093",
    }
    result = CliRunner().invoke(cli, arguments, env=elsewhere)
    assert result.exit_code == 2, result.output
    assert "SAGALOG_BOOTSTRAP_SERVERS is kafka.example.com:9093" in result.output
    assert not (secure / "security").exists()  # no password was made for the wrong cluster
