"""``sagalog replay whatif`` on the real broker: a v2 that adds a step before the gate.

The live tracker (virtual clock) runs five workflows under orders v1 with an 80 h
deadline: wf-quick approved after 1 h, wf-rejected rejected after 1 h, wf-slow
approved after 70 h at the gate, wf-late whose first three steps took 3 h each and
whose gate was approved 68 h after it opened (done at 77 h), and wf-expired, never
decided (the gate's default rejects it at 72 h). The candidate v2 adds
``check_vendor`` before the gate, which no recorded workflow ever reached:

- assumed to take no time (the default), nothing changes;
- assumed to take 6 h, only wf-late ends differently: its gate opens 6 h later, so
  its approval would come at 83 h, after the 80 h deadline (timed out, compensated);
  wf-slow's would come at 76 h, still in time;
- assumed to fail, the three workflows that completed are compensated instead;
  wf-rejected and wf-expired are compensated the same way as recorded, but
  wf-expired no longer waits 72 h at the gate, so its part in the flow's SLA rule
  (time in pending_approval above 4 h) is gone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from sagalog.cli.main import cli

from .test_replay_rebuild import _at, _requested, _undo_all
from .tracker_harness import FORWARD, SECRET, TrackerLab, latest_records

HOUR = 3_600_000
ORDERS = Path(__file__).parent / "flows" / "orders.v1.yaml"
UNDO_ALL = ["retrieve_policies", "classify_request", "reserve_budget"]


def v1_text() -> str:
    return (
        ORDERS.read_text()
        .replace("deadline: 5d", "deadline: 80h")
        .replace("timeout: 10m", "timeout: 1d")
    )


def v2_text(suffix: str) -> str:
    step = (
        "  - name: check_vendor\n    agent: vendor-agent\n    after: retrieve_policies\n"
        "    completes_on: procurement.v1.VendorNotified\n    timeout: 1d\n    effect: none\n\n"
    )
    text = v1_text().replace("version: 1", "version: 2")
    return text.replace("  - gate: manager_approval", step + "  - gate: manager_approval").replace(
        "{s}", suffix
    )


def _steps(lab: TrackerLab, workflow_id: str, steps: list[tuple[str, str]]) -> None:
    for step, _ in steps:
        lab.wait(lambda s=step: _at(lab, workflow_id, "running", s), what=f"{workflow_id} {step}")
        lab.complete(workflow_id, step)


def record_history(lab: TrackerLab) -> None:
    lab.add_flow("orders.v1.yaml", text=v1_text())
    lab.tracker()
    for workflow_id in ("wf-quick", "wf-rejected", "wf-slow", "wf-expired", "wf-late"):
        lab.start(workflow_id)
    for workflow_id in ("wf-quick", "wf-rejected", "wf-slow", "wf-expired"):
        _steps(lab, workflow_id, FORWARD[:3])
        lab.wait_state(workflow_id, "pending_approval")
    lab.advance(1 * HOUR)  # t = 1 h
    lab.decide_gate("wf-quick", "APPROVED")
    _steps(lab, "wf-quick", FORWARD[3:])
    lab.wait_state("wf-quick", "completed")
    lab.decide_gate("wf-rejected", "REJECTED")
    _undo_all(lab, "wf-rejected", UNDO_ALL, "compensated")
    for step, _ in FORWARD[:3]:  # wf-late: each step takes 3 h, its gate opens at 9 h
        lab.advance(3 * HOUR if step != "reserve_budget" else 2 * HOUR)
        _steps(lab, "wf-late", [(step, "")])
    lab.wait_state("wf-late", "pending_approval")
    lab.advance(61 * HOUR)  # t = 70 h
    lab.decide_gate("wf-slow", "APPROVED")
    _steps(lab, "wf-slow", FORWARD[3:])
    lab.wait_state("wf-slow", "completed")
    lab.advance(2 * HOUR + 1000)  # t = 72 h: wf-expired's gate rejects by default
    lab.wait(lambda: _requested(lab, "wf-expired") == UNDO_ALL[:1], what="wf-expired rejected")
    _undo_all(lab, "wf-expired", UNDO_ALL, "compensated")
    lab.advance(5 * HOUR)  # t = 77 h: 68 h after wf-late's gate opened
    lab.decide_gate("wf-late", "APPROVED")
    _steps(lab, "wf-late", FORWARD[3:])
    lab.wait_state("wf-late", "completed")
    lab.wait(lambda: len(latest_records(lab)) == 5, what="every record stored")


def whatif(lab: TrackerLab, candidate: Path, *args: str) -> Result:
    return CliRunner().invoke(
        cli,
        [
            "--project-dir",
            str(lab.project.root),
            "replay",
            "whatif",
            "--candidate",
            str(candidate),
            "--transitions-topic",
            lab.transitions_topic,
            *args,
        ],
        env={"SAGALOG_TRACKER_GATE_SECRET": SECRET},
        catch_exceptions=False,
    )


def changed(result: Result) -> dict[str, Any]:
    assert result.exit_code in (0, 10), result.output
    report = json.loads(result.stdout)
    assert report["workflows"] == 5
    assert report["not_reproduced"] == []  # the simulated v1 ends as the tracker did
    return {c["workflow_id"]: c for c in report["changed"]}


def test_a_step_added_before_the_gate_changes_exactly_the_workflows_it_delays_past_the_deadline(
    tracker_lab: TrackerLab, tmp_path: Path
) -> None:
    lab = tracker_lab
    record_history(lab)
    candidate = tmp_path / "orders.v2.yaml"
    candidate.write_text(v2_text(lab.suffix))

    assert changed(whatif(lab, candidate, "--json")) == {}

    delayed = changed(whatif(lab, candidate, "--assume", "check_vendor=6h", "--json"))
    assert set(delayed) == {"wf-late"}
    late = delayed["wf-late"]
    assert late["baseline"]["state"] == "completed"
    assert late["candidate"]["state"] == "timed_out"
    assert late["candidate"]["compensations"] == UNDO_ALL
    assert late["changes"] == ["state", "compensations"]

    failing = changed(whatif(lab, candidate, "--assume", "check_vendor=fail", "--json"))
    assert set(failing) == {"wf-quick", "wf-slow", "wf-late", "wf-expired"}
    assert {c["candidate"]["state"] for c in failing.values()} == {"compensated"}
    # wf-slow and wf-late no longer wait at the gate for days (the SLA rule's 4 h) ...
    assert failing["wf-quick"]["changes"] == ["state", "compensations"]
    assert failing["wf-slow"]["changes"] == ["state", "compensations", "sla"]
    assert failing["wf-late"]["changes"] == ["state", "compensations", "sla"]
    # ... nor does wf-expired, which is compensated the same way as recorded.
    assert failing["wf-expired"]["changes"] == ["sla"]

    table = whatif(lab, candidate, "--assume", "check_vendor=6h", "--detailed-exitcode")
    assert table.exit_code == 10
    assert "1 of 5 workflows would end differently" in table.stdout
    row = next(line for line in table.stdout.splitlines() if line.strip().startswith("wf-late"))
    assert "completed" in row and "timed_out" in row and "state, compensations" in row
    assert "shadow group sagalog-whatif-orders-v2-" in table.stdout


def test_bad_assumptions_and_an_empty_topic_are_clear(
    tracker_lab: TrackerLab, tmp_path: Path
) -> None:
    lab = tracker_lab
    lab.add_flow("orders.v1.yaml", text=v1_text())
    candidate = tmp_path / "orders.v2.yaml"
    candidate.write_text(v2_text(lab.suffix))
    unknown = whatif(lab, candidate, "--assume", "check_vendr=6h")
    assert unknown.exit_code == 2
    assert "has no step or gate 'check_vendr'" in unknown.stderr
    wrong = whatif(lab, candidate, "--assume", "manager_approval=fail")
    assert wrong.exit_code == 2
    assert "approve[@DURATION], reject[@DURATION] or never" in wrong.stderr
    empty = whatif(lab, candidate)  # nothing was ever published to the topic
    assert empty.exit_code == 0, empty.output
    assert "no recorded workflows of this flow: nothing to compare" in empty.stdout
