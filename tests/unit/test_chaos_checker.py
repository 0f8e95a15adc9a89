"""The chaos checker's invariants, on hand-made histories (tests/chaos/checker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.checker import (
    Effect,
    Entry,
    FlowRules,
    Planned,
    RoundHistory,
    Send,
    Transition,
    check,
    duplicated_effects,
    effect_differences,
    illegal_transitions,
    lost_events,
    lost_workflows,
    rebuild_mismatches,
    recovery_s,
)
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.loader import load_flows
from sagalog.topology.loader import load_topology

# The reference flow's shape: three steps, a budget step with a compensation, a gate,
# an ordering step with a compensation and a last, irreversible step.
RULES = FlowRules(
    (
        Entry("classify_request"),
        Entry("retrieve_policies"),
        Entry("score_risk"),
        Entry("reserve_budget", undoable=True),
        Entry("manager_approval", gate=True),
        Entry("create_purchase_order", undoable=True),
        Entry("notify_vendor", undoable=True),
    )
)

HAPPY = [
    ("initiated", "running", "classify_request"),
    ("running", "running", "retrieve_policies"),
    ("running", "running", "score_risk"),
    ("running", "running", "reserve_budget"),
    ("running", "pending_approval", "manager_approval"),
    ("pending_approval", "approved", "manager_approval"),
    ("approved", "running", "create_purchase_order"),
    ("running", "running", "notify_vendor"),
    ("running", "completed", None),
]
REJECTED = [
    *HAPPY[:5],
    ("pending_approval", "compensating", "reserve_budget"),
    ("compensating", "compensated", None),
]
ORDER_FAILED = [
    *HAPPY[:7],
    ("running", "compensating", "reserve_budget"),
    ("compensating", "compensated", None),
]


def moves(workflow_id: str, path: list[tuple[str, str, str | None]]) -> list[Transition]:
    return [
        Transition(workflow_id, f"{workflow_id}-t{i}", source, target, step)
        for i, (source, target, step) in enumerate(path)
    ]


def test_the_rules_of_the_reference_flow_file_are_the_hand_written_ones(repo_root: Path) -> None:
    catalog = SchemaCatalog.load(repo_root / "schemas")
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    flows = load_flows(repo_root / "topology" / "flows", catalog=catalog, topology=topology)
    assert FlowRules.of(flows.latest("procurement")) == RULES


@pytest.mark.parametrize("path", [HAPPY, REJECTED, ORDER_FAILED])
def test_every_planned_path_is_legal(path: list[tuple[str, str, str | None]]) -> None:
    assert illegal_transitions(RULES, {"w": moves("w", path)}) == {}


def test_a_deadline_may_compensate_or_time_out_from_anywhere_not_terminal() -> None:
    deadline = [*HAPPY[:5], ("pending_approval", "compensating", "reserve_budget")]
    deadline.append(("compensating", "timed_out", None))
    assert illegal_transitions(RULES, {"w": moves("w", deadline)}) == {}
    early = [*HAPPY[:2], ("running", "timed_out", None)]
    assert illegal_transitions(RULES, {"w": moves("w", early)}) == {}


def test_a_timed_out_step_with_an_effect_undoes_itself_first() -> None:
    timeout = [*HAPPY[:8], ("running", "compensating", "notify_vendor")]
    timeout += [
        ("compensating", "compensating", "create_purchase_order"),
        ("compensating", "compensating", "reserve_budget"),
        ("compensating", "compensated", None),
    ]
    assert illegal_transitions(RULES, {"w": moves("w", timeout)}) == {}


def test_a_republished_transition_is_not_illegal_but_a_new_one_out_of_order_is() -> None:
    path = moves("w", HAPPY)
    republished = [*path[:4], path[2], path[3], *path[4:]]  # same ids again after a crash
    assert illegal_transitions(RULES, {"w": republished}) == {}
    replayed = [*path[:4], Transition("w", "new", "running", "running", "score_risk"), *path[4:]]
    found = illegal_transitions(RULES, {"w": replayed})
    assert len(found["w"]) >= 1


def test_skipping_a_step_leaving_a_terminal_state_and_a_wrong_origin_are_illegal() -> None:
    skipped = [HAPPY[0], ("running", "running", "score_risk"), *HAPPY[3:]]
    assert "is not in the flow" in illegal_transitions(RULES, {"w": moves("w", skipped)})["w"][0]
    after_end = [*HAPPY, ("completed", "compensating", "create_purchase_order")]
    assert "left terminal" in illegal_transitions(RULES, {"w": moves("w", after_end)})["w"][0]
    elsewhere = [HAPPY[0], ("pending_approval", "approved", "manager_approval")]
    assert (
        "but the workflow was at"
        in illegal_transitions(RULES, {"w": moves("w", elsewhere)})["w"][0]
    )


def test_compensating_a_step_that_never_completed_is_illegal() -> None:
    early = [*HAPPY[:3], ("running", "compensating", "create_purchase_order")]
    assert illegal_transitions(RULES, {"w": moves("w", early)})


def test_lost_means_acknowledged_and_absent() -> None:
    sends = [Send("e1", "w1", "T", True), Send("e2", "w2", "T", False), Send("e3", "w3", "T", True)]
    assert lost_events(sends, {"e1"}) == ["e3"]
    planned = [Planned("w1", "r1", "completed"), Planned("w2", "r2", "completed")]
    tracked = {"w1": moves("w1", HAPPY[:1])}
    assert lost_workflows(planned, sends, tracked, {}) == []  # w2 was never acknowledged
    assert lost_workflows(planned, [*sends, Send("e4", "w2", "T", True)], tracked, {}) == ["w2"]


def test_an_effect_applied_twice_under_two_keys_is_a_duplicate() -> None:
    effects = [
        Effect("reserve", "r1", "k1"),
        Effect("reserve", "r1", "k2"),
        Effect("send", "r1", "k3"),
    ]
    assert duplicated_effects(effects) == {("reserve", "r1"): 2}
    missing, unexpected = effect_differences(
        [Planned("w1", "r1", "completed", {"reserve": 1, "create_po": 1})], effects
    )
    assert missing == {("create_po", "r1"): 1}
    assert unexpected == {("send", "r1"): 1}


def test_recovery_is_the_longest_wait_for_progress_after_an_injection() -> None:
    assert recovery_s([(0.0, 1.0), (10.0, 12.0)], [0.5, 4.0, 12.5, 20.0]) == 3.0
    assert recovery_s([], [1.0]) is None
    assert recovery_s([(0.0, 5.0)], [1.0]) is None


def test_rebuild_mismatch_includes_missing_records() -> None:
    assert rebuild_mismatches({"a": 1, "b": 2}, {"a": 1, "b": 3}, ["a", "b", "c"]) == ["b", "c"]


def history(**changes: object) -> RoundHistory:
    planned = [Planned(f"w{i}", f"r{i}", "completed", {"reserve": 1}) for i in range(5)]
    base = RoundHistory(
        fault="test",
        seed=1,
        planned=planned,
        sends=[Send(f"e{i}", f"w{i}", "RequestSubmitted", True) for i in range(5)],
        logged_event_ids={f"e{i}" for i in range(5)},
        transitions={f"w{i}": moves(f"w{i}", HAPPY) for i in range(5)},
        states={f"w{i}": "completed" for i in range(5)},
        states_after_deadline={f"w{i}": "completed" for i in range(5)},
        effects=[Effect("reserve", f"r{i}", f"k{i}") for i in range(5)],
        live={f"w{i}": ("completed",) for i in range(5)},
        rebuilt={f"w{i}": ("completed",) for i in range(5)},
    )
    for name, value in changes.items():
        setattr(base, name, value)
    return base


def test_a_clean_history_passes() -> None:
    result = check(history(), RULES)
    assert result.ok, result.failures
    assert (result.lost, result.duplicated_effects, result.stuck) == (0, 0, 0)


def test_a_round_where_too_few_workflows_ended_as_planned_fails() -> None:
    failed = {f"w{i}": ("failed" if i < 2 else "completed") for i in range(5)}
    result = check(history(states=failed, states_after_deadline=failed), RULES)
    assert not result.ok
    assert "ended as planned" in result.failures[0]
    assert result.wrong_end == 2


def test_each_broken_invariant_is_counted_and_fails_the_round() -> None:
    result = check(
        history(
            logged_event_ids={"e0"},
            effects=[Effect("reserve", "r0", "k0"), Effect("reserve", "r0", "again")],
            states_after_deadline={"w0": "running"},
            rebuilt={},
        ),
        RULES,
    )
    assert result.lost == 4
    assert result.duplicated_effects == 1
    assert result.stuck == 5  # w0 still running, w1..w4 with no state at all
    assert result.rebuild_mismatches == 5
    assert not result.ok
    assert len(result.failures) >= 4


def test_service_exits_are_counted_by_service_and_code_and_fail_a_round_that_allows_none() -> None:
    exits = [("budget_agent", 70), ("tracker-a", 1), ("budget_agent", 70)]
    counted = check(history(exits=exits), RULES)
    assert counted.ok  # no bound: counted, not judged
    assert counted.exits == 3
    assert counted.exits_by_service == {"budget_agent": {"70": 2}, "tracker-a": {"1": 1}}
    assert counted.row()["exits_by_service"] == counted.exits_by_service
    judged = check(history(exits=exits, max_exits=0), RULES)
    assert not judged.ok
    assert "3 service exits (budget_agent 70 x2, tracker-a 1 x1)" in judged.failures[0]
    assert check(history(exits=[], max_exits=0), RULES).ok


def test_exits_a_fault_causes_are_counted_but_only_those_beyond_them_are_judged() -> None:
    once = [("tracker-a", 70)]
    judged = check(history(exits=once, max_exits=0, expected_exits={"tracker-a": 1}), RULES)
    assert judged.ok, judged.failures
    assert judged.exits == 1
    twice = check(history(exits=once * 2, max_exits=0, expected_exits={"tracker-a": 1}), RULES)
    assert not twice.ok
    assert "1 beyond those the fault causes" in twice.failures[0]
    other = [*once, ("budget_agent", 70)]
    assert not check(history(exits=other, max_exits=0, expected_exits={"tracker-a": 1}), RULES).ok
