"""``--assume``: what a candidate's unobserved entries do, parsed and checked against the flow."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import ConfigurationError
from sagalog.flows.model import Flow
from sagalog.replay.assumptions import (
    GATE_DEFAULT,
    STEP_DEFAULT,
    UNDO_DEFAULT,
    Answer,
    Assumption,
    assumption_for,
    parse_assumptions,
)

from .test_tracker_processor import orders_registry

H = 3_600_000


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory, catalog: SchemaCatalog) -> Flow:
    return orders_registry(Path(tmp_path_factory.mktemp("orders")), catalog).latest("orders")


def test_steps_gates_and_compensations_take_their_own_answers(flow: Flow) -> None:
    assumed = parse_assumptions(
        [
            "score_risk=6h",
            "classify_request=fail@10m",
            "create_purchase_order=never",
            "manager_approval=reject@2h",
            "reserve_budget.undo=30m",
        ],
        flow,
    )
    assert assumed == {
        "score_risk": Assumption(Answer.COMPLETE, 6 * H),
        "classify_request": Assumption(Answer.FAIL, 10 * 60_000),
        "create_purchase_order": Assumption(Answer.NEVER),
        "manager_approval": Assumption(Answer.REJECT, 2 * H),
        "reserve_budget.undo": Assumption(Answer.COMPLETE, 30 * 60_000),
    }
    assert parse_assumptions(["manager_approval=2h"], flow)["manager_approval"] == Assumption(
        Answer.APPROVE, 2 * H
    )
    assert str(assumed["manager_approval"]) == "reject@2h"
    assert str(assumed["score_risk"]) == "6h"


def test_without_an_assumption_new_entries_pass_at_once(flow: Flow) -> None:
    assert assumption_for("step", "score_risk", {}) == STEP_DEFAULT == Assumption(Answer.COMPLETE)
    assert assumption_for("gate", "manager_approval", {}) == GATE_DEFAULT
    assert assumption_for("undo", "reserve_budget", {}) == UNDO_DEFAULT
    told = {"reserve_budget.undo": Assumption(Answer.NEVER)}
    assert assumption_for("undo", "reserve_budget", told) == Assumption(Answer.NEVER)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("check_vendor=1h", "has no step or gate 'check_vendor'; it has reserve_budget"),
        ("manager_approval=fail", "say approve[@DURATION], reject[@DURATION] or never"),
        ("score_risk=approve", "say DURATION, fail[@DURATION] or never"),
        ("reserve_budget.undo=fail", "say DURATION or never"),
        ("manager_approval.undo=1h", "has no undoable step 'manager_approval'"),
        ("score_risk=soon", "is not a positive duration"),
        ("score_risk=never@1h", "never takes no duration"),
        ("score_risk", "write NAME=SPEC"),
    ],
)
def test_a_wrong_assumption_says_what_is_accepted(flow: Flow, text: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_assumptions([text], flow)
    assert says in str(error.value)
    assert text in str(error.value)
