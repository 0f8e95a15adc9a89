"""ACLs as code on the secure dev stack: applied exactly, sufficient, and least.

The run's private secure ``LocalStack`` (``secure_stack``, ``tests/stacks.py``: 1
broker; SASL_SSL with SCRAM-SHA-512 and the stack's CA; ``StandardAuthorizer``, deny
by default; registry behind basic auth), shared with the secure stack's own tests.
The project is the repository's own topology: the procurement flow, its topics and
``topology/services.yaml``. ``apply`` runs as the stack's admin; every service
connects as its own SCRAM user, created by ``sagalog topology apply --dev-users``
with the stack's passwords (``LocalStack.service_credential``, the ones ``sagalog dev
env --principal NAME`` prints). Records are raw bytes: the bytes are beside the
point of an authorization test.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from faust.types import TP
from pydantic import SecretStr

from procurement.events import RequestSubmitted
from sagalog import client_config
from sagalog.agents.claims import ClaimsLog, read_claims
from sagalog.agents.declaration import Agent
from sagalog.agents.internal_topics import ensure_internal_topics
from sagalog.agents.outputs import Result
from sagalog.agents.settings import AgentSettings
from sagalog.agents.state_store import StateStore
from sagalog.agents.triage import Outcome
from sagalog.agents.worker import AgentWorker
from sagalog.budgets.book import Spend
from sagalog.budgets.claims import ClaimNote
from sagalog.budgets.ledger import Usage, held_from_ms
from sagalog.cli.main import cli
from sagalog.cluster import connect_admin
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.devstack import LocalStack
from sagalog.devstack.credentials import SCRAM_ITERATIONS
from sagalog.errors import AuthorizationError
from sagalog.events import GateDecided, StateTransition
from sagalog.flows.loader import load_flows
from sagalog.publisher import EventPublisher
from sagalog.services.tracker.log_input import LogInput
from sagalog.settings import ClientSettings
from sagalog.topology.acl_apply import current_acls, to_binding
from sagalog.topology.acls import AclRule, Operation, PatternKind, ResourceKind, derive_acls
from sagalog.topology.loader import load_topology
from stacks import cli_environment, client_settings, sagalog

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = "procurement.events"
RETRY_TOPIC = "sagalog.agent.risk-agent.retry"


def intake_agent() -> Agent:
    """The intake agent as the reference flow names it; these tests never run its handler."""
    agent = Agent("intake-agent")

    @agent.handles(step="classify_request")
    async def classify_request(event: RequestSubmitted, ctx: Any) -> Any:
        raise NotImplementedError

    return agent


class RawCodec:
    """Encodes nothing: the bytes are beside the point of an authorization test."""

    def encode(self, topic: str, event_type: str, datum: Any) -> bytes:
        return b"raw"


@pytest.fixture(scope="module")
def stack(secure_stack: LocalStack) -> LocalStack:
    return secure_stack


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("secure-project")
    shutil.copytree(REPO / "schemas", root / "schemas")
    shutil.copytree(REPO / "topology", root / "topology")
    return root


def as_admin(stack: LocalStack) -> ClientSettings:
    """The stack's super user, as ``sagalog dev env`` exports it."""
    return client_settings(stack.client_environment())


def as_service(stack: LocalStack, user: str) -> ClientSettings:
    """``user``'s own SCRAM login, with the password ``apply --dev-users`` gave the brokers."""
    credential = stack.service_credential(user)
    return as_admin(stack).model_copy(
        update={"sasl_username": credential.username, "sasl_password": credential.password}
    )


def admin_client(stack: LocalStack) -> AdminClient:
    return AdminClient(as_admin(stack).kafka_config())


def run(stack: LocalStack, project: Path, *args: str) -> tuple[int, str]:
    """``sagalog`` in-process as the stack's admin, with nothing of the caller's SAGALOG_*."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SAGALOG_")}
    env |= {k: v for k, v in cli_environment(stack).items() if k.startswith("SAGALOG_")}
    env |= stack.client_environment()
    result = CliRunner().invoke(cli, ["--project-dir", str(project), *args], env=env)
    return result.exit_code, result.output


def exports(stack: LocalStack, *args: str) -> dict[str, str]:
    """What ``eval "$(sagalog dev env ARGS)"`` would set, from the real command."""
    printed = sagalog("dev", "env", *args, env=cli_environment(stack))
    assert printed.returncode == 0, printed.stderr
    pairs = (shlex.split(line.removeprefix("export "))[0] for line in printed.stdout.splitlines())
    return dict(pair.split("=", 1) for pair in pairs)


def derived(project: Path) -> tuple[AclRule, ...]:
    catalog = SchemaCatalog.load(project / "schemas")
    topology = load_topology(project / "topology", known_schemas=catalog)
    flows = load_flows(project / "topology" / "flows", catalog=catalog, topology=topology)
    return derive_acls(topology, flows)


def cluster_acls(stack: LocalStack) -> set[AclRule]:
    acls = current_acls(admin_client(stack), broker_ids=[1], timeout=15)
    assert acls is not None, "the secure stack has an authorizer"
    return set(acls)


def topics_of(principal: str, rules: tuple[AclRule, ...], existing: set[str]) -> set[str]:
    """The existing topics the authorizer lets ``principal`` see (any right implies DESCRIBE)."""
    mine = [r for r in rules if r.principal == principal and r.resource_type is ResourceKind.TOPIC]
    return {
        topic
        for topic in existing
        for rule in mine
        if topic == rule.resource_name
        or (rule.pattern_type is PatternKind.PREFIXED and topic.startswith(rule.resource_name))
    }


def produce_as_admin(stack: LocalStack, topic: str, value: bytes, key: bytes = b"wf-1") -> None:
    producer = Producer(as_admin(stack).producer_config())
    producer.produce(topic, key=key, value=value)
    assert producer.flush(15) == 0
    producer.close()


def read_all(stack: LocalStack, topic: str, *, committed: bool = True) -> list[bytes]:
    """Every record of ``topic`` as the admin sees it, read_committed or not."""
    isolation = "read_committed" if committed else "read_uncommitted"
    config = as_admin(stack).kafka_config(
        **{
            "group.id": f"test-reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer = Consumer(config)
    metadata = consumer.list_topics(topic, timeout=15).topics[topic]
    consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 20
    while len(at_end) < len(metadata.partitions) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            at_end.add(int(message.partition() or 0))
            continue
        values.append(bytes(message.value() or b""))
    consumer.close()
    return values


@pytest.fixture(scope="module")
def applied(stack: LocalStack, project: Path) -> dict[str, Any]:
    """The first ``sagalog topology apply --dev-users`` on the empty stack, as a user runs it.

    ``sagalog dev env --principal budget-agent`` runs first, so that service's password
    is made by ``dev env`` and the brokers must get that one.
    """
    before = cluster_acls(stack)
    budget_agent = exports(stack, "--principal", "budget-agent")
    env = cli_environment(stack, stack.client_environment())
    result = sagalog("--project-dir", str(project), "topology", "apply", "--dev-users", env=env)
    return {
        "before": before,
        "code": result.returncode,
        "output": result.stdout + result.stderr,
        "after": cluster_acls(stack),
        "budget-agent": budget_agent,
    }


# -- plan and apply ---------------------------------------------------------------------


def test_apply_on_an_empty_cluster_creates_exactly_the_derived_bindings(
    applied: dict[str, Any], project: Path, stack: LocalStack
) -> None:
    assert applied["code"] == 0, applied["output"]
    assert applied["before"] == set()
    rules = derived(project)
    assert applied["after"] == set(rules)
    # the procurement and the filing flows, the key topic, claims, model streams
    assert len(rules) == 220
    output = applied["output"]
    assert (
        "done: + create acl User:gateway: ALLOW DESCRIBE on GROUP PREFIXED 'sagalog-gateway-'"
        in output
    )
    # Every principal got its SCRAM user; the passwords are the stack's 0600 files, never
    # printed by apply.
    for principal in {r.principal for r in rules}:
        user = principal.removeprefix("User:")
        credential = stack.security.credentials.existing(user)
        assert credential is not None, f"apply --dev-users made no password for {user}"
        assert stat.S_IMODE(stack.security.credentials.path(user).stat().st_mode) == 0o600
        assert credential.password.get_secret_value() not in output
        assert (
            f"SCRAM-SHA-512 user {user} (password: `sagalog dev env --principal {user}`)" in output
        )


def test_a_second_plan_and_apply_change_nothing(
    applied: dict[str, Any], stack: LocalStack, project: Path
) -> None:
    code, output = run(stack, project, "topology", "plan", "--detailed-exitcode")
    assert (code, output.strip()) == (0, "nothing to change: the cluster matches the topology")
    code, output = run(stack, project, "topology", "apply", "--dev-users")
    assert (code, output.strip()) == (0, "nothing to change: the cluster matches the topology")


def test_dev_env_gives_the_logins_apply_made_the_brokers_accept(
    applied: dict[str, Any], stack: LocalStack, project: Path
) -> None:
    """End to end, as a user runs it: ``apply --dev-users``, then ``eval "$(sagalog dev env
    --principal NAME)"``: the client gets in as ``User:NAME`` and sees what NAME may see,
    whether ``dev env`` made the password before ``apply`` (budget-agent) or after."""
    rules = derived(project)
    _, everything = connect_admin(as_admin(stack))
    existing = set(everything.topics)
    for user, environment in (
        ("intake-agent", exports(stack, "--principal", "intake-agent")),
        ("budget-agent", applied["budget-agent"]),
    ):
        assert environment["SAGALOG_SASL_USERNAME"] == user
        assert environment["SAGALOG_SECURITY_PROTOCOL"] == "SASL_SSL"
        _, metadata = connect_admin(client_settings(environment))
        visible = set(metadata.topics)
        assert visible == topics_of(f"User:{user}", rules, existing), user
        assert WORKFLOWS in visible and "sagalog.transitions" not in visible


def test_a_hand_added_binding_is_removed_only_with_force(
    applied: dict[str, Any], stack: LocalStack, project: Path
) -> None:
    admin = admin_client(stack)
    hand_made = AclRule(
        "User:intake-agent",
        ResourceKind.TOPIC,
        PatternKind.LITERAL,
        "sagalog.agent.risk-agent.retry",
        Operation.READ,
    )
    operators = AclRule(
        "User:ops", ResourceKind.TOPIC, PatternKind.PREFIXED, "sagalog.", Operation.READ
    )
    for future in admin.create_acls([to_binding(hand_made), to_binding(operators)]).values():
        future.result(timeout=15)

    code, output = run(stack, project, "topology", "plan", "--detailed-exitcode")
    assert code == 10, output
    line = (
        "- delete acl User:intake-agent: ALLOW READ on TOPIC LITERAL "
        "'sagalog.agent.risk-agent.retry'"
    )
    assert line in output
    assert "User:ops" not in output  # not a declared principal: left alone
    assert "1 change(s), 1 need --force" in output

    code, output = run(stack, project, "topology", "apply")
    assert code == 4, output
    assert "refused 1 change(s) that need --force (0 other change(s) applied)" in output
    assert line in output
    assert hand_made in cluster_acls(stack)

    code, output = run(stack, project, "topology", "apply", "--force")
    assert code == 0, output
    acls = cluster_acls(stack)
    assert hand_made not in acls and operators in acls
    assert {a for a in acls if a.principal != "User:ops"} == set(derived(project))


# -- the derived rights are sufficient ------------------------------------------------------


def test_an_agent_consumes_and_produces_in_a_transaction_as_itself(
    applied: dict[str, Any], stack: LocalStack
) -> None:
    agent = as_service(stack, "intake-agent")
    # The runtime's own start: check the inputs and dead-letter topic, create the retry topic.
    partitions = ensure_internal_topics(
        agent,
        inputs=[WORKFLOWS],
        retry_topic="sagalog.agent.intake-agent.retry",
        deadletter_topic="sagalog.deadletter",
    )
    assert partitions == 6
    marker = f"submitted-{uuid.uuid4()}".encode()
    produce_as_admin(stack, WORKFLOWS, marker)

    consumer = Consumer(
        agent.kafka_config(
            **{
                "group.id": "sagalog-agent-intake-agent",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
    )
    consumer.subscribe([WORKFLOWS, "sagalog.agent.intake-agent.retry"])
    found = None
    deadline = time.monotonic() + 30
    while found is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None and message.value() == marker:
            found = message
        assert message is None or message.error() is None, message.error()
    assert found is not None
    producer = Producer(
        agent.producer_config(**{"transactional.id": "sagalog-agent-intake-agent-it-1"})
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(WORKFLOWS, key=b"wf-1", value=b"classified-" + marker)
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    producer.close()
    consumer.close()
    assert b"classified-" + marker in read_all(stack, WORKFLOWS)


def test_an_agent_creates_writes_and_reads_its_budget_claims_topic_as_itself(
    applied: dict[str, Any], stack: LocalStack, tmp_path: Path
) -> None:
    """An agent with budgets: the runtime's start creates its claims topic, each model
    call's claim is written by a plain idempotent producer, and a partition's next
    holder reads it with assign() under a throwaway ``sagalog-hydrate-`` group."""
    agent = as_service(stack, "intake-agent")
    topic = "sagalog.agent.intake-agent.claims"
    partitions = ensure_internal_topics(
        agent,
        inputs=[WORKFLOWS],
        retry_topic="sagalog.agent.intake-agent.retry",
        deadletter_topic="sagalog.deadletter",
        claims_topic=topic,
    )
    now_ms = int(time.time() * 1000)
    claim = Spend("model", f"claim-{uuid.uuid4()}", now_ms, Usage(tokens=90))
    claims = ClaimsLog(agent)
    try:
        asyncio.run(claims.write(topic, ClaimNote(WORKFLOWS, partitions - 1, claim)))
    finally:
        claims.close()
    store = StateStore(tmp_path / "store")
    try:
        read_claims(
            agent,
            store,
            topic=topic,
            partitions=frozenset({partitions - 1}),
            from_ms=held_from_ms(now_ms),
        )
        assert (partitions - 1, claim) in list(store.spends())
    finally:
        store.close()


def test_the_tracker_creates_its_prefixed_topics_and_writes_idempotently(
    applied: dict[str, Any], stack: LocalStack
) -> None:
    tracker = as_service(stack, "saga-tracker")
    admin = AdminClient(tracker.kafka_config())
    changelog = NewTopic(
        "saga-tracker-records-changelog", 6, 1, config={"cleanup.policy": "compact"}
    )
    [created] = admin.create_topics([changelog], request_timeout=15).values()
    created.result(timeout=15)
    [outside] = admin.create_topics([NewTopic("other-app-records-changelog", 1, 1)]).values()
    with pytest.raises(KafkaException, match=r"(?i)authoriz"):
        outside.result(timeout=15)
    # An idempotent (non-transactional) producer, as every producer_config is, with no
    # CLUSTER right (KIP-679).
    producer = Producer(tracker.producer_config())
    errors: list[Any] = []
    producer.produce("sagalog.transitions", value=b"t", on_delivery=lambda e, m: errors.append(e))
    producer.produce(
        changelog.topic, key=b"k", value=b"v", on_delivery=lambda e, m: errors.append(e)
    )
    assert producer.flush(30) == 0
    producer.close()
    assert errors == [None, None]


def test_the_gateway_follows_with_assign_and_publishes_decisions(
    applied: dict[str, Any], stack: LocalStack, project: Path
) -> None:
    gateway = as_service(stack, "gateway")
    errors: list[Any] = []
    consumer = Consumer(
        gateway.kafka_config(
            **{
                "group.id": f"sagalog-gateway-it-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "error_cb": errors.append,
            }
        )
    )
    consumer.assign([TopicPartition("sagalog.transitions", 0, 0)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None or message.error().code() < 0, message.error()
    consumer.close()
    assert errors == []
    catalog = SchemaCatalog.load(project / "schemas")
    publisher = EventPublisher(gateway, catalog=catalog, source="gateway", codec=RawCodec())  # type: ignore[arg-type]
    decided = GateDecided(gate="g", token="t", decision="APPROVED", decided_by="me")  # type: ignore[arg-type]
    assert publisher.publish_event(WORKFLOWS, decided).topic == WORKFLOWS
    publisher.close()


# -- the derived rights are least --------------------------------------------------------------


def test_an_agent_writing_a_topic_it_may_not_is_denied_and_its_transaction_aborted(
    applied: dict[str, Any], stack: LocalStack, project: Path, tmp_path: Path
) -> None:
    settings = AgentSettings(
        **as_service(stack, "intake-agent").model_dump(),
        instance_id="it-denied",
        data_dir=tmp_path / "data",
    )
    settings = settings.model_copy(update={"project_dir": str(project)})
    worker = AgentWorker(intake_agent(), settings, catalog=SchemaCatalog.load(project / "schemas"))
    worker.clients.producer = worker.clients.new_producer()
    worker.clients.consumer = Consumer(
        settings.kafka_config(
            **{
                "group.id": worker.group_id,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
    )
    worker.clients.consumer.assign([TopicPartition(WORKFLOWS, 0, 0)])
    worker.clients.consumer.poll(1)
    marker = f"would-be-output-{uuid.uuid4()}".encode()
    outcome = Result(
        Outcome.HANDLED,
        records=[
            (WORKFLOWS, b"wf-1", marker, []),  # allowed, but in the same transaction
            ("sagalog.alerts", b"wf-1", marker, []),  # the tracker's topic: no WRITE
        ],
    )
    with pytest.raises(AuthorizationError) as caught:
        worker._commit([outcome])
    message = str(caught.value)
    assert caught.value.exit_code == 6
    assert message.startswith("User:intake-agent may not WRITE topic 'sagalog.alerts'"), message
    assert worker.stats.aborted == 1
    # Aborted: written to the log, but never visible to a read_committed reader.
    assert marker in read_all(stack, WORKFLOWS, committed=False)
    assert marker not in read_all(stack, WORKFLOWS)
    worker.clients.producer.begin_transaction()  # the producer is ready again: nothing left open
    worker.clients.producer.abort_transaction(15)
    # Closed here: the exception's traceback keeps the worker, and a producer left to
    # the garbage collector went on reconnecting to the stack after it stopped.
    worker.clients.producer.close()
    worker.clients.consumer.close()


def ensure_retry_topic(stack: LocalStack) -> None:
    """The risk agent's retry topic, which other principals may not read."""
    admin = admin_client(stack)
    [created] = admin.create_topics([NewTopic(RETRY_TOPIC, 6, 1)]).values()
    try:
        created.result(timeout=15)
    except KafkaException as exc:
        assert "already exists" in str(exc).lower()


def test_an_agent_reading_another_agents_retry_topic_is_denied(
    applied: dict[str, Any], stack: LocalStack, project: Path, tmp_path: Path
) -> None:
    ensure_retry_topic(stack)
    settings = AgentSettings(
        **as_service(stack, "intake-agent").model_dump(),
        instance_id="it-reader",
        data_dir=tmp_path / "data",
    )
    settings = settings.model_copy(update={"project_dir": str(project)})
    worker = AgentWorker(intake_agent(), settings, catalog=SchemaCatalog.load(project / "schemas"))
    worker.clients.consumer = Consumer(
        settings.kafka_config(**{"group.id": worker.group_id, "enable.auto.commit": False})
    )
    worker.store = store = StateStore(tmp_path / "store", folded_types=None)
    worker.clients.consumer.subscribe(["sagalog.agent.risk-agent.retry"])
    deadline = time.monotonic() + 30
    with pytest.raises(AuthorizationError) as caught:
        while time.monotonic() < deadline:
            worker._iteration()
    worker.clients.consumer.close()
    store.close()
    message = str(caught.value)
    assert caught.value.exit_code == 6
    assert message.startswith(
        "User:intake-agent may not READ topic 'sagalog.agent.risk-agent.retry'"
    ), message


def test_the_trackers_input_reading_a_topic_it_has_no_right_to_is_denied(
    applied: dict[str, Any], stack: LocalStack
) -> None:
    """The tracker's own consumer (``log_input``) stops with the principal and the
    topic named, exit 6, instead of warning forever."""
    ensure_retry_topic(stack)
    log_input = LogInput(
        as_service(stack, "saga-tracker"),
        group="saga-tracker",
        client_id="saga-tracker-input",
        capacity=100,
    )

    async def read() -> None:
        log_input.assign(1, [TP("sagalog.agent.risk-agent.retry", 0)])
        async for _ in log_input.records():
            pass

    try:
        with pytest.raises(AuthorizationError) as caught:
            asyncio.run(asyncio.wait_for(read(), 60))
    finally:
        log_input.stop()
    message = str(caught.value)
    assert caught.value.exit_code == 6
    assert message.startswith(
        "User:saga-tracker may not READ topic 'sagalog.agent.risk-agent.retry'"
    ), message


def test_the_gateway_may_not_write_transitions(
    applied: dict[str, Any], stack: LocalStack, project: Path
) -> None:
    gateway = as_service(stack, "gateway")
    catalog = SchemaCatalog.load(project / "schemas")
    publisher = EventPublisher(gateway, catalog=catalog, source="gateway", codec=RawCodec())  # type: ignore[arg-type]
    transition = StateTransition(
        flow="procurement",
        flow_version=1,
        from_state="running",
        to_state="completed",
        cause_event_id="e",
        time_in_previous_state_ms=1,
        at="2026-01-01T00:00:00Z",  # type: ignore[arg-type]
    )
    with pytest.raises(AuthorizationError) as caught:
        publisher.publish_event("sagalog.transitions", transition)
    publisher.close()
    assert str(caught.value).startswith("User:gateway may not WRITE topic 'sagalog.transitions'"), (
        caught.value
    )
    assert caught.value.exit_code == 6


def test_faust_runs_as_the_tracker_with_only_the_derived_rights(
    applied: dict[str, Any], stack: LocalStack, tmp_path: Path
) -> None:
    """faust creates its changelog and assignor topics, joins, reads, writes its table and
    commits: CREATE/READ/WRITE/DESCRIBE on '<app id>-' and READ on the group suffice
    (no DESCRIBE_CONFIGS, ALTER_CONFIGS or CLUSTER right)."""
    key = f"wf-faust-{uuid.uuid4()}".encode()
    producer = Producer(as_admin(stack).producer_config())
    producer.produce(WORKFLOWS, key=key, value=b"submitted")
    assert producer.flush(15) == 0
    producer.close()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SAGALOG_")},
        **client_config.environment(as_service(stack, "saga-tracker")),
        "FAUST_APP_ID": "saga-tracker",
        "FAUST_DATA_DIR": str(tmp_path / "faust"),
        "FAUST_TOPIC": WORKFLOWS,
    }
    log = (tmp_path / "faust.log").open("wb")
    worker = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("faust_as_tracker.py")),
            "worker",
            "-l",
            "warn",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    try:
        # A bound for a loaded machine, not a measure: it usually takes ~4 s, and once
        # (CI, 2026-12-05) faust took 89 s from its tables opening to the write.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and worker.poll() is None:
            topics = admin_client(stack).list_topics(timeout=15).topics
            if "saga-tracker-records-changelog" in topics and b"submitted" in read_all(
                stack, "saga-tracker-records-changelog"
            ):
                break
            time.sleep(1)
        text = (tmp_path / "faust.log").read_text(errors="replace")
        assert worker.poll() is None, text[-3000:]
        assert "saga-tracker-__assignor-__leader" in topics, text[-3000:]
        assert b"submitted" in read_all(stack, "saga-tracker-records-changelog"), text[-3000:]
        assert "authorization" not in text.lower(), text[-3000:]
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()


def test_a_principal_the_topology_does_not_declare_may_do_nothing(
    applied: dict[str, Any], stack: LocalStack
) -> None:
    """Deny by default: a user with a valid login and no derived binding sees no topic,
    and the agent runtime's start says so instead of calling the topic missing."""
    upsert = UserScramCredentialUpsertion(
        "stranger",
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
        b"stranger-pw",
    )
    admin = admin_client(stack)  # kept: a collected client fails its futures
    [future] = admin.alter_user_scram_credentials([upsert]).values()
    future.result(timeout=15)
    stranger = as_admin(stack).model_copy(
        update={"sasl_username": "stranger", "sasl_password": SecretStr("stranger-pw")}
    )
    assert not [t for t in AdminClient(stranger.kafka_config()).list_topics(timeout=15).topics]
    with pytest.raises(AuthorizationError) as caught:
        ensure_internal_topics(
            stranger,
            inputs=[WORKFLOWS],
            retry_topic="sagalog.agent.stranger.retry",
            deadletter_topic="sagalog.deadletter",
        )
    assert str(caught.value).startswith(
        f"User:stranger may not DESCRIBE topic '{WORKFLOWS}' (or it does not exist"
    ), caught.value
