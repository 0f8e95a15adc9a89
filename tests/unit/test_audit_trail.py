"""The audit trail assembled from fetched records: order, causes, gates, models, output."""

from __future__ import annotations

import json

from sagalog.audit.lookup import partition_for
from sagalog.audit.render import to_json, to_text
from sagalog.audit.trail import build_trail, causation_path
from sagalog.audit.verify import verify

from .audit_fixtures import TOPIC, decode, history, record


def test_events_keep_the_log_order_and_transitions_follow_their_cause() -> None:
    h = history()
    trail = build_trail(h.seal, h.events, h.transitions, decode=decode)
    order = [(e.kind, e.event_id) for e in trail.entries]
    assert order == [
        ("event", "e0"),
        ("transition", "t0"),  # caused by e0
        ("event", "e1"),
        ("event", "e2"),
        ("transition", "t1"),  # a timer's: after the last event logged before it
        ("event", "e3"),
        ("event", "e4"),
        ("transition", "t2"),
    ]
    assert [e.sealed_index for e in trail.events] == [0, 1, 2, 3, 4]


def test_each_event_knows_its_causes_back_to_the_start() -> None:
    h = history()
    trail = build_trail(h.seal, h.events, h.transitions, decode=decode)
    scored = trail.events[-1]
    assert scored.causation_path == ("e3", "e2", "e1", "e0")
    assert trail.events[0].causation_path == ()
    assert causation_path("a", {"a": "b", "b": "a"}) == ("a", "b")  # a cycle ends


def test_gate_decisions_say_who_what_and_when_and_tokens_are_shortened() -> None:
    h = history()
    trail = build_trail(h.seal, h.events, h.transitions, decode=decode)
    opened, decided = trail.events[2], trail.events[3]
    assert opened.gate is not None and opened.gate.assignee == "managers@example.com"
    assert decided.gate is not None
    assert (decided.gate.decision, decided.gate.decided_by, decided.gate.at) == (
        "APPROVED",
        "ana@example.com",
        "2027-01-15T08:00:04Z",
    )
    assert decided.payload is not None and decided.payload["token"] == "...-value"


def test_a_model_decision_shows_its_lineage() -> None:
    h = history()
    scored = build_trail(h.seal, h.events, h.transitions, decode=decode).events[-1]
    assert scored.model is not None
    assert (scored.model.model_id, scored.model.prompt_hash) == ("risk-model-3", "sha256:abc")
    assert scored.model.input_refs == ("e0", "doc-9")
    assert scored.model.outcome == {"score": 0.2, "level": "LOW"}


def test_an_effect_shows_its_intent_its_reconciliation_and_its_result() -> None:
    h = history()
    effect = {
        "agent": "budget",
        "effect": "ledger.reserve",
        "idempotency_key": "k-1",
        "result_json": '{"id": "r-1"}',
        "dependency": "ledger",
        "arguments_sha256": "ab" * 32,
        "intended_at": "2027-01-15T08:00:01.250Z",
        "reconciliation": "found: the dependency's lookup by idempotency key found the result",
    }
    h.events.append(record(TOPIC, 7, "sagalog.v1.EffectRecorded", "e9", effect, cause="e4"))
    text = to_text(build_trail(h.seal, h.events, h.transitions, decode=decode))
    assert (
        "     EFFECT ledger.reserve key k-1\n"
        "           intended 2027-01-15T08:00:01.250Z on ledger (arguments sha256 "
        "abababababababab...)\n"
        "           reconciled found: the dependency's lookup by idempotency key found the "
        "result\n"
        '           result {"id": "r-1"}'
    ) in text


def test_text_and_json_carry_the_same_history_and_findings() -> None:
    h = history()
    trail = build_trail(h.seal, h.events, h.transitions, decode=decode)
    verification = verify(h.seal, h.events[:1] + h.events[2:], h.transitions)
    text = to_text(trail, verification=verification)
    assert "GATE manager_approval: APPROVED by ana@example.com at 2027-01-15T08:00:04Z" in text
    assert "MODEL risk-model-3 decided at 2027-01-15T08:00:06Z: score=0.2, level=LOW" in text
    assert "caused by e3 <- e2 <- e1 <- e0" in text
    assert "-> tracker: running -> completed" in text
    assert "verification FAILED" in text and "MISSING: event e1" in text
    body = json.loads(json.dumps(to_json(trail, verification=verification)))
    assert [e["event_id"] for e in body["history"] if e["kind"] == "event"] == [
        "e0",
        "e1",
        "e2",
        "e3",
        "e4",
    ]
    assert body["history"][-2]["model_decision"]["input_refs"] == ["e0", "doc-9"]
    assert body["verification"]["ok"] is False
    assert body["verification"]["findings"][0]["kind"] == "missing"


def test_the_key_partition_is_the_java_clients() -> None:
    # murmur2 values from Kafka's own UtilsTest; the partition is (hash & 0x7fffffff) % n.
    java = {b"21": -973932308, b"foobar": -790332482, b"abc": 479470107}
    for key, murmur in java.items():
        assert partition_for(key, 6) == (murmur & 0x7FFFFFFF) % 6
