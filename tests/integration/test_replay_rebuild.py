"""``sagalog replay rebuild`` on the real broker: the live tracker's state, rebuilt from the log.

A tracker process (virtual clock) runs workflows through every kind of timer firing
the rules know: a step timeout, a compensation that times out and is requested
again, a gate that escalates and then expires (its default rejects), a failure and
its compensations, an event parked before its predecessor, a workflow left half way
with timers pending. The rebuild then reads the log into a fresh store and must
agree with the tracker's records changelog on every diffed field; against a copy of
the changelog with one record altered and one missing, it must name both. An
interrupted rebuild continued with the same store ends where an uninterrupted one
does, record for record.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.cli.main import cli
from sagalog.topic_names import records_changelog

from .project import REPO
from .tracker_harness import DAY_MS, FORWARD, SECRET, Driver, TrackerLab, latest_records

MIN = 60_000
HOUR = 60 * MIN


def _at(lab: TrackerLab, workflow_id: str, state: str, step: str | None) -> bool:
    moves = lab.transitions(workflow_id)
    return bool(moves) and moves[-1]["to_state"] == state and moves[-1]["step"] == step


def _to_gate(lab: TrackerLab, workflow_id: str) -> None:
    lab.start(workflow_id)
    for step, _ in FORWARD[:3]:
        lab.wait(lambda s=step: _at(lab, workflow_id, "running", s), what=f"{workflow_id} {step}")
        lab.complete(workflow_id, step)
    lab.wait_state(workflow_id, "pending_approval")


def _requested(lab: TrackerLab, workflow_id: str) -> list[str]:
    return [c["step"] for c in lab.events(workflow_id, "sagalog.v1.CompensationRequested")]


def _undo_all(lab: TrackerLab, workflow_id: str, steps: list[str], end: str) -> None:
    for step in steps:
        lab.wait(lambda s=step: _requested(lab, workflow_id)[-1:] == [s], what=f"undo {step}")
        lab.undo(workflow_id, step)
    lab.wait_state(workflow_id, end)


def run_scenario(lab: TrackerLab) -> dict[str, str]:
    """Workflows through every kind of timer firing; their expected end states."""
    lab.tracker()
    for workflow_id in ("wf-happy", "wf-gate", "wf-wait", "wf-fail"):
        _to_gate(lab, workflow_id)
    # An event before its predecessor: parked, then applied after it.
    lab.start("wf-park")
    lab.wait(lambda: _at(lab, "wf-park", "running", "reserve_budget"), what="wf-park started")
    lab.complete("wf-park", "classify_request")
    lab.complete("wf-park", "reserve_budget")
    lab.wait(lambda: _at(lab, "wf-park", "running", "retrieve_policies"), what="parked applied")
    lab.complete("wf-park", "retrieve_policies")
    lab.wait_state("wf-park", "pending_approval")
    # A failure after approval: three compensations in reverse order.
    lab.decide_gate("wf-fail", "APPROVED")
    lab.wait(lambda: _at(lab, "wf-fail", "running", "score_risk"), what="wf-fail at step 4")
    lab.fail("wf-fail", "score_risk")
    _undo_all(
        lab, "wf-fail", ["retrieve_policies", "classify_request", "reserve_budget"], "compensated"
    )
    # A failure whose compensation is stuck: requested again when its 30 m pass.
    lab.start("wf-stuck")
    lab.wait(lambda: _at(lab, "wf-stuck", "running", "reserve_budget"), what="wf-stuck")
    lab.complete("wf-stuck", "reserve_budget")
    lab.wait(lambda: _at(lab, "wf-stuck", "running", "classify_request"), what="wf-stuck 2")
    lab.fail("wf-stuck", "classify_request")
    lab.wait(lambda: _requested(lab, "wf-stuck") == ["reserve_budget"], what="first request")
    # A step that never completes: its 10 m timeout undoes it.
    lab.start("wf-timeout")
    lab.wait(lambda: _at(lab, "wf-timeout", "running", "reserve_budget"), what="wf-timeout")
    lab.advance(11 * MIN)
    lab.wait(lambda: _requested(lab, "wf-timeout") == ["reserve_budget"], what="step timeout")
    _undo_all(lab, "wf-timeout", ["reserve_budget"], "compensated")
    lab.advance(20 * MIN)  # 31 m after wf-stuck's first request
    lab.wait(lambda: len(_requested(lab, "wf-stuck")) == 2, what="the request repeated")
    _undo_all(lab, "wf-stuck", ["reserve_budget"], "compensated")
    # Approved at once: completes.
    lab.decide_gate("wf-happy", "APPROVED")
    for step, _ in FORWARD[3:]:
        lab.wait(lambda s=step: _at(lab, "wf-happy", "running", s), what=step)
        lab.complete("wf-happy", step)
    lab.wait_state("wf-happy", "completed")
    # The gates of wf-gate, wf-wait and wf-park escalate after 24 h and reject at 72 h.
    lab.advance(24 * HOUR)
    lab.wait(lambda: len(lab.events("wf-gate", "sagalog.v1.GateOpened")) == 2, what="escalation")
    lab.advance(2 * DAY_MS)
    lab.wait(lambda: _requested(lab, "wf-gate") == ["retrieve_policies"], what="gate default")
    _undo_all(
        lab, "wf-gate", ["retrieve_policies", "classify_request", "reserve_budget"], "compensated"
    )
    lab.wait(lambda: _requested(lab, "wf-wait") == ["retrieve_policies"], what="wf-wait undoing")
    lab.wait(lambda: _requested(lab, "wf-park") == ["retrieve_policies"], what="wf-park undoing")
    # wf-wait and wf-park are left compensating, with their timers pending.
    expected = {
        "wf-happy": "completed",
        "wf-gate": "compensated",
        "wf-wait": "compensating",
        "wf-park": "compensating",
        "wf-fail": "compensated",
        "wf-stuck": "compensated",
        "wf-timeout": "compensated",
    }
    lab.wait(
        lambda: {w: r["state"] for w, r in latest_records(lab).items()} == expected,
        what="the changelog holding every final record",
    )
    return expected


def rebuild(lab: TrackerLab, store: Path, *args: str, as_json: bool = True) -> Result:
    return CliRunner().invoke(
        cli,
        [
            "--project-dir",
            str(lab.project.root),
            "replay",
            "rebuild",
            "--store",
            str(store),
            "--app-id",
            lab.app_id,
            "--transitions-topic",
            lab.transitions_topic,
            *(["--json"] if as_json else []),
            *args,
        ],
        env={"SAGALOG_TRACKER_GATE_SECRET": SECRET},
        catch_exceptions=False,
    )


def report(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_rebuild_after_timers_fired_matches_the_live_state(
    tracker_lab: TrackerLab, tmp_path: Path
) -> None:
    lab = tracker_lab
    expected = run_scenario(lab)
    result = rebuild(lab, tmp_path / "rebuild")
    assert result.exit_code == 0, result.output
    found = report(result)
    assert found["mismatches"] == []
    assert found["workflows"] == {"rebuilt": len(expected), "live": len(expected)}
    fired = found["timers_fired"]
    # On the journal: wf-timeout's step timeout and the three gates' defaults. Read back
    # from the workflow topic: the three escalations and wf-stuck's repeated request.
    assert (fired["recorded"], fired["at_output"]) == (4, 4)
    assert fired["not_reproduced"] == []
    assert found["undecodable"]["count"] == 0

    # The same rebuild against a changelog with one record altered and one missing.
    altered = _altered_changelog(lab, state_of="wf-happy", drop="wf-timeout")
    result = rebuild(lab, tmp_path / "rebuild", "--changelog", altered)
    assert result.exit_code == 1, result.output
    mismatches = report(result)["mismatches"]
    assert {
        "workflow_id": "wf-happy",
        "field": "state",
        "live": "failed",
        "rebuilt": "completed",
    } in mismatches
    assert {
        "workflow_id": "wf-timeout",
        "field": "(record)",
        "live": None,
        "rebuilt": "compensated",
    } in mismatches
    assert {m["workflow_id"] for m in mismatches} == {"wf-happy", "wf-timeout"}
    text = rebuild(lab, tmp_path / "rebuild", "--changelog", altered, as_json=False)
    assert text.exit_code == 1
    assert "wf-happy  state: live 'failed', rebuilt 'completed'" in text.stdout
    assert "wf-timeout  missing in the live state (rebuilt: compensated)" in text.stdout


def _altered_changelog(lab: TrackerLab, *, state_of: str, drop: str) -> str:
    """A copy of the tracker's records changelog with one state changed and one record gone."""
    topic = f"altered-changelog.{lab.suffix}"
    admin = AdminClient(lab.project.settings.kafka_config())
    for future in admin.create_topics([NewTopic(topic, 3)]).values():
        future.result(timeout=15)
    producer = Producer(lab.project.settings.producer_config())
    for workflow_id, record in latest_records(lab).items():
        if workflow_id == drop:
            continue
        if workflow_id == state_of:
            record = {**record, "state": "failed"}
        producer.produce(topic, key=workflow_id.encode(), value=json.dumps(record).encode())
    assert producer.flush(15) == 0
    return topic


def test_an_interrupted_rebuild_continues_where_it_stopped(
    tracker_lab: TrackerLab, tmp_path: Path
) -> None:
    lab = tracker_lab
    driver = Driver(lab)
    lab.tracker()
    ids = driver.start(120)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        driver.step(ids)
        if all(lab.state(w) in ("completed", "compensated") for w in ids):
            break
        time.sleep(0.3)
    lab.wait(lambda: len(latest_records(lab)) == len(ids), what="every record in the changelog")
    whole = rebuild(lab, tmp_path / "whole")
    assert whole.exit_code == 0, whole.output
    assert report(whole)["resumed"] is False

    # Stopped (as Ctrl-C stops it) part way, then run again with the same store.
    first = rebuild(lab, tmp_path / "parts", "--chunk-size", "50", "--stop-after", "300")
    assert first.exit_code == 130
    assert "run the same command again to continue" in first.stderr.lower()
    again = rebuild(lab, tmp_path / "parts", "--chunk-size", "50")
    assert again.exit_code == 0, again.output
    continued = report(again)
    assert continued["resumed"] is True and continued["mismatches"] == []
    assert 0 < continued["read_now"] < continued["records"]
    assert _records(tmp_path / "parts") == _records(tmp_path / "whole")

    # Killed outright (SIGKILL) while replaying, then run again.
    command = [
        sys.executable,
        "-m",
        "sagalog",
        "--project-dir",
        str(lab.project.root),
        "replay",
        "rebuild",
        "--store",
        str(tmp_path / "killed"),
        "--app-id",
        lab.app_id,
        "--transitions-topic",
        lab.transitions_topic,
        "--chunk-size",
        "5",
    ]
    env = {
        **os.environ,
        "SAGALOG_TRACKER_GATE_SECRET": SECRET,
        "PYTHONPATH": str(REPO / "services"),
    }
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:  # progress lines: kill it once the replay is under way
        if line.startswith("replay"):
            break
    time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert "no mismatches" in finished.stdout
    assert "(continued from an earlier run)" in finished.stdout
    print(finished.stdout)
    assert _records(tmp_path / "killed") == _records(tmp_path / "whole")


def _records(store: Path) -> dict[str, bytes]:
    """Every rebuilt record in a store, by workflow id."""
    from sagalog.replay.store import MARKER, RebuildStore

    meta = json.loads((store / MARKER).read_text())
    with RebuildStore.open(store, meta=meta) as opened:
        return {w: r for p in range(3) for w, r in opened.records(p)}


@pytest.fixture(autouse=True)
def _gate_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGALOG_TRACKER_GATE_SECRET", SECRET)


def test_an_empty_log_and_unreadable_records_are_reported_not_fatal(
    tracker_lab: TrackerLab, tmp_path: Path
) -> None:
    lab = tracker_lab
    lab.tracker()
    lab.wait(lambda: records_changelog(lab.app_id) in _topics(lab), what="the tracker's changelog")
    empty = rebuild(lab, tmp_path / "empty")
    assert empty.exit_code == 0, empty.output
    found = report(empty)
    assert (found["records"], found["mismatches"]) == (0, [])
    assert found["workflows"] == {"rebuilt": 0, "live": 0}

    lab.start("wf-1")
    producer = Producer(lab.project.settings.producer_config())
    producer.produce(lab.topic, key=b"wf-1", value=b"garbage", headers=[("x", b"y")])
    producer.flush(10)
    lab.wait(lambda: len(lab.seen.deadletters) == 1, what="the tracker dead-lettering it")
    lab.wait(lambda: "wf-1" in latest_records(lab), what="wf-1 stored")
    result = rebuild(lab, tmp_path / "bad")
    assert result.exit_code == 0, result.output
    found = report(result)
    assert found["mismatches"] == [] and found["workflows"]["rebuilt"] == 1
    assert found["undecodable"]["count"] == 1
    [example] = found["undecodable"]["examples"]
    assert example["topic"] == lab.topic and "ce_id" in example["reason"]
    text = rebuild(lab, tmp_path / "bad", as_json=False)
    assert "1 record(s) unreadable, left out as the tracker leaves them" in text.stdout
    # The empty log's store again: it keeps its snapshot (no events), while the live
    # state moved on since: wf-1 is missing from the rebuild.
    again = rebuild(lab, tmp_path / "empty", as_json=False)
    assert again.exit_code == 1
    assert "the workflow topics hold no events: nothing to rebuild" in again.stdout
    assert "wf-1  missing in the rebuilt state (live: running)" in again.stdout


def _topics(lab: TrackerLab) -> set[str]:
    admin = AdminClient(lab.project.settings.kafka_config())
    return set(admin.list_topics(timeout=10).topics)
