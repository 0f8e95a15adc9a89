"""``audit --verify``'s checks as plain functions: each kind of tampering, named."""

from __future__ import annotations

from dataclasses import replace

from sagalog.audit.verify import FindingKind, verify
from sagalog.contracts.hash_chain import chain_start, chain_values

from .audit_fixtures import TOPIC, hash_of, history, record, resigned


def test_an_untouched_log_verifies_clean() -> None:
    h = history()
    result = verify(h.seal, h.events, h.transitions)
    assert result.ok, result.findings
    assert (result.events_checked, result.transitions_checked) == (5, 3)


def test_a_modified_event_is_named_by_its_own_hash_and_by_the_seal() -> None:
    h = history()
    reserved = h.event("e1")
    tampered = replace(reserved, value=b'{"amount": "100000"}')  # header left as it was
    events = [tampered if e is reserved else e for e in h.events]
    findings = verify(h.seal, events, h.transitions).findings
    modified = [f for f in findings if f.kind is FindingKind.MODIFIED]
    assert [(f.event_id, f.position) for f in modified] == [("e1", f"{TOPIC}/0@1")]
    assert "does not match its own sagalog_hash" in modified[0].message
    assert "differs from what the tracker sealed as event #2" in modified[0].message
    # The tracker's later stamps no longer match the log: corroboration, reported once.
    assert FindingKind.BROKEN_LINK in {f.kind for f in findings}
    assert FindingKind.MISSING not in {f.kind for f in findings}


def test_a_modified_and_re_signed_event_is_caught_by_the_seal() -> None:
    h = history()
    scored = h.event("e4")
    events = [resigned(scored, score=0.01) if e is scored else e for e in h.events]
    findings = verify(h.seal, events, h.transitions).findings
    modified = [f for f in findings if f.kind is FindingKind.MODIFIED]
    assert [f.event_id for f in modified] == ["e4"]
    assert "own sagalog_hash" not in modified[0].message
    assert "sealed as event #5" in modified[0].message
    # The transition the tracker published after reading it links to the original.
    links = [f for f in findings if f.kind is FindingKind.BROKEN_LINK]
    assert [f.event_id for f in links] == ["t2"]


def test_a_missing_event_is_named_with_its_sealed_position() -> None:
    h = history()
    events = [e for e in h.events if e.header_values["ce_id"] != "e1"]
    findings = verify(h.seal, events, h.transitions).findings
    missing = [f for f in findings if f.kind is FindingKind.MISSING]
    assert [(f.event_id, f.position) for f in missing] == [("e1", f"{TOPIC}/0@1")]
    assert not {FindingKind.MODIFIED, FindingKind.REORDERED} & {f.kind for f in findings}


def test_a_reordered_pair_is_named_once_with_both_events() -> None:
    h = history()
    events = list(h.events)
    events[3], events[4] = events[4], events[3]
    findings = verify(h.seal, events, h.transitions).findings
    reordered = [f for f in findings if f.kind is FindingKind.REORDERED]
    assert len(reordered) == 1
    assert {reordered[0].event_id, reordered[0].other_event_id} == {"e3", "e4"}
    assert not {FindingKind.MODIFIED, FindingKind.MISSING} & {f.kind for f in findings}


def test_an_event_slipped_in_among_the_sealed_ones_is_inserted_but_a_later_one_is_a_note() -> None:
    h = history()
    forged = record(TOPIC, 2, "procurement.v1.BudgetReserved", "e-forged", {"amount": "1"})
    late = record(TOPIC, 9, "procurement.v1.PurchaseOrderCreated", "e-late", {})
    events = [*h.events[:2], forged, *h.events[2:], late]
    result = verify(h.seal, events, h.transitions)
    assert [(f.kind, f.event_id) for f in result.findings] == [(FindingKind.INSERTED, "e-forged")]
    assert any("e-late" in n and "not sealed yet" in n for n in result.notes)


def test_a_changed_record_does_not_recompute_to_its_chain_head() -> None:
    h = history()
    sealed = list(h.seal.sealed)
    sealed[1] = sealed[1].model_copy(update={"hash": "0" * 64})
    findings = verify(replace(h.seal, sealed=tuple(sealed)), h.events, h.transitions).findings
    assert FindingKind.SEAL_MISMATCH in {f.kind for f in findings}


def test_a_cause_changed_after_its_effect_consumed_it_breaks_the_prev_hash_link() -> None:
    h = history()
    scored = h.event("e4")
    # The effect was re-linked to a hash nothing in the log has; content and seal agree.
    relinked = record(
        TOPIC,
        6,
        "procurement.v1.RiskScored",
        "e4",
        {"score": 0.2},
        cause="e3",
        prev_hash="f" * 64,
    )
    events = [relinked if e is scored else e for e in h.events]
    sealed = tuple(
        s.model_copy(update={"hash": hash_of(relinked)}) if s.event_id == "e4" else s
        for s in h.seal.sealed
    )
    seal = replace(
        h.seal, sealed=sealed, chain=chain_values(chain_start("wf-7"), [s.hash for s in sealed])[-1]
    )
    findings = verify(seal, events).findings
    assert [(f.kind, f.event_id, f.other_event_id) for f in findings] == [
        (FindingKind.BROKEN_LINK, "e4", "e3")
    ]


def test_a_transition_with_a_chain_the_log_never_reached_is_a_broken_link() -> None:
    h = history()
    bad = record(
        "sagalog.transitions",
        13,
        "sagalog.v1.StateTransition",
        "t9",
        {"from_state": "a", "to_state": "b"},
        chain="e" * 64,
    )
    findings = verify(h.seal, h.events, [*h.transitions, bad]).findings
    assert [(f.kind, f.event_id) for f in findings] == [(FindingKind.BROKEN_LINK, "t9")]
