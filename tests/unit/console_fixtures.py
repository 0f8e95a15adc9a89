"""The console's HTTP rig: the gateway's app over a real read model (RocksDB in a
temporary directory), a publisher that keeps what it is given, a story source and a
dead-letter log that answer from memory, a clock the test moves. No Kafka."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient

from sagalog.audit.collect import Collected, verify_collected
from sagalog.audit.reading import LoggedEvent
from sagalog.audit.trail import AuditTrail, build_trail
from sagalog.audit.verify import Verification
from sagalog.dead_letters import DeadLetter
from sagalog.errors import SagalogError
from sagalog.flows.model import Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.position import RecordPosition
from sagalog.services.gateway.api import create_app
from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.console.routes import ConsoleOptions
from sagalog.services.gateway.dead_letter_log import FoundDeadLetter
from sagalog.services.gateway.dead_letter_operations import DeadLetterOperations
from sagalog.services.gateway.follower import FollowerStatus
from sagalog.services.gateway.read_model import ReadModel, TransitionEntry
from sagalog.services.gateway.replays import EarlierReplay
from sagalog.tracker.record import WorkflowRecord

from . import audit_fixtures
from .gateway_fixtures import SECRET, KeptPublisher

KEY = "console-operator-key"
READER_KEY = "console-reader-key"
SESSION_S = 3600
NOW = dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.UTC)
DLQ = "procurement.deadletter"


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


@dataclass
class MemoryStories:
    """The story source: a trail given by the test, or a failure."""

    trail: AuditTrail | None = None
    failure: SagalogError | None = None
    asked: list[str] = field(default_factory=list)
    log: audit_fixtures.History = field(default_factory=audit_fixtures.history)
    """What ``verified`` checks: the audit's sample log, which a test may tamper with."""

    def story(self, record: WorkflowRecord, history: Sequence[TransitionEntry]) -> AuditTrail:
        self.asked.append(record.workflow_id)
        if self.failure is not None:
            raise self.failure
        assert self.trail is not None, "the test gave no trail"
        return self.trail

    def verified(
        self, record: WorkflowRecord, history: Sequence[TransitionEntry]
    ) -> tuple[AuditTrail, Verification]:
        trail = self.story(record, history)
        log = self.log
        collected = Collected(
            trail=trail,
            events=tuple(log.events),
            transitions=tuple(log.transitions),
            read=lambda _: None,  # no blob references in the sample log
        )
        return trail, verify_collected(collected, None)


def dead_letter(offset: int, *, workflow_id: str | None = "wf-3") -> DeadLetter:
    return DeadLetter(
        position=RecordPosition(DLQ, 0, offset),
        origin=RecordPosition("procurement.events", 0, 100 + offset),
        agent="budget_agent",
        reason=f"budget service said no ({offset})",
        error_class="ValueError",
        stack="Traceback ...",
        attempts=3,
        dead_lettered_at_ms=1_700_000_000_000 + offset,
        event_type="procurement.v1.RiskScored",
        event_id=f"e-{offset}",
        workflow_id=workflow_id,
    )


@dataclass
class MemoryDeadLetters:
    """Stands in for ``DeadLetterLog``: the same methods, over a list."""

    letters: list[DeadLetter]
    topics: tuple[str, ...] = (DLQ,)
    read: int = 0
    replayed: dict[RecordPosition, list[EarlierReplay]] = field(default_factory=dict)

    def scan_after(self, after: RecordPosition | None) -> Iterator[DeadLetter]:
        for letter in self.letters:
            if after is None or letter.position.offset > after.offset:
                self.read += 1
                yield letter

    def record_count(self) -> int:
        return len(self.letters)

    def replays(self, letters: Any) -> dict[RecordPosition, list[EarlierReplay]]:
        return {
            x.position: self.replayed[x.position] for x in letters if x.position in self.replayed
        }

    def at(self, position: RecordPosition) -> FoundDeadLetter | None:
        for letter in self.letters:
            if letter.position == position:
                record = LoggedEvent(
                    topic=position.topic,
                    partition=position.partition,
                    offset=position.offset,
                    timestamp_ms=letter.dead_lettered_at_ms,
                    key=(letter.workflow_id or "").encode(),
                    value=b'{"score": "<script>x</script>"}',
                    headers=(("ce_id", b"e-1"), ("ce_type", b"procurement.v1.RiskScored")),
                )
                return FoundDeadLetter(letter, record)
        return None

    def decoded(self, record: LoggedEvent) -> tuple[dict[str, Any] | None, str | None]:
        return json.loads(record.value or b"{}"), None


@dataclass
class ConsoleRig:
    client: TestClient
    model: ReadModel
    publisher: KeptPublisher
    gateway: Gateway
    stories: MemoryStories
    letters: MemoryDeadLetters
    clock: dict[str, dt.datetime]

    def put(self, *records: WorkflowRecord) -> None:
        batch = self.model.batch()
        for r in records:
            batch.put_record(r.workflow_id, json.dumps(r.to_stored()).encode())
        batch.commit()

    def sign_in(
        self, key: str = KEY, who: str = "ann@example.com", client: TestClient | None = None
    ) -> Any:
        client = client or self.client
        form = client.get("/console/sign-in")
        return client.post(
            "/console/sign-in",
            data={"api_key": key, "who": who, "csrf_token": csrf_of(form.text), "next": "/console"},
            follow_redirects=False,
        )

    def csrf(self) -> str:
        return csrf_of(self.client.get("/console/gates").text)

    def new_client(self, *, base_url: str = "http://testserver", **changes: Any) -> TestClient:
        return TestClient(self.app(**changes), base_url=base_url)

    def app(self, **changes: Any) -> Any:
        options = {
            "api_keys": [KEY.encode()],
            "read_only_keys": [READER_KEY.encode()],
            "max_body_bytes": 16_384,
            "webhook_source": "sagalog/gateway",
            "dead_letters": DeadLetterOperations(self.gateway, self.letters),  # type: ignore[arg-type]
            "console": ConsoleOptions(session_s=SESSION_S, stories=self.stories),
            **changes,
        }
        return create_app(self.gateway, **options)


def reference_trail() -> AuditTrail:
    """The audit's own sample history (``audit_fixtures``): five events, three transitions."""
    history = audit_fixtures.history()
    return build_trail(
        history.seal, history.events, history.transitions, decode=audit_fixtures.decode
    )


def console_rig(model: ReadModel, flow: Flow) -> ConsoleRig:
    publisher = KeptPublisher()
    clock = {"now": NOW}
    gateway = Gateway(
        model=model,
        publisher=publisher,
        flows=FlowRegistry([flow]),
        secret=SECRET,
        status=lambda: FollowerStatus(ready=True, health="ok", lag=0),
        now=lambda: clock["now"],
    )
    rig = ConsoleRig(
        client=None,  # type: ignore[arg-type]
        model=model,
        publisher=publisher,
        gateway=gateway,
        stories=MemoryStories(trail=reference_trail()),
        letters=MemoryDeadLetters([dead_letter(n) for n in range(3)]),
        clock=clock,
    )
    rig.client = TestClient(rig.app())
    return rig
