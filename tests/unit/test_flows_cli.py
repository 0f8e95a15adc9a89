"""`sagalog flows check` and `sagalog flows graph` on a copy of the project's files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sagalog.cli.main import cli


@pytest.fixture
def project(tmp_path: Path, repo_root: Path) -> Path:
    shutil.copytree(repo_root / "schemas", tmp_path / "schemas")
    shutil.copytree(repo_root / "topology", tmp_path / "topology")
    return tmp_path


def sagalog(project: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--project-dir", str(project), *args])


def flow_file(project: Path, version: int = 1) -> Path:
    return project / "topology" / "flows" / f"procurement.v{version}.yaml"


def test_check_prints_one_line_per_flow_version(project: Path) -> None:
    v2 = flow_file(project).read_text().replace("version: 1", "version: 2")
    flow_file(project, 2).write_text(v2)
    result = sagalog(project, "flows", "check")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("ok  filing v1: 0 step(s), 0 gate(s), 1 wait(s), 1 SLA rule(s)")
    assert lines[1].startswith("ok  filing v2: 3 step(s), 1 gate(s), 1 wait(s), 2 SLA rule(s)")
    assert lines[2].startswith(
        "ok  procurement v1: 6 step(s), 1 gate(s), 2 segment(s), 2 SLA rule(s), deadline 5d ("
    )
    assert lines[3].startswith("ok  procurement v2:") and lines[3].endswith("procurement.v2.yaml)")


def test_check_reports_every_problem_and_exits_2(project: Path) -> None:
    text = flow_file(project).read_text()
    broken = text.replace("timeout: 10m        # a model call", "timeout: soon").replace(
        "deadline: 72h", "deadline: later"
    )
    assert broken.count("soon") == 1 and "later" in broken
    flow_file(project).write_text(broken)
    result = sagalog(project, "flows", "check")
    assert result.exit_code == 2
    assert "ok  procurement" not in result.stdout
    errors = result.stderr.splitlines()
    assert errors[0].startswith("error: ") and "step 'score_risk', field 'timeout'" in errors[0]
    assert "gate 'manager_approval', field 'deadline'" in errors[1]
    assert errors[-1].startswith("2 problem(s) in 1 of 3 flow file(s)")


def test_check_goes_on_to_schemas_once_fields_are_right(project: Path) -> None:
    text = flow_file(project).read_text()
    flow_file(project).write_text(
        text.replace(
            "completes_on: procurement.v1.BudgetReleased",
            "completes_on: procurement.v1.BudgetRelesed",
        )
    )
    result = sagalog(project, "flows", "check")
    assert result.exit_code == 2
    assert (
        "flow 'procurement' v1, step 'reserve_budget': compensation 'release_budget' completes "
        "on 'procurement.v1.BudgetRelesed', which has no schema in "
    ) in result.stderr


def test_graph_writes_mermaid_to_stdout_by_default(project: Path) -> None:
    result = sagalog(project, "flows", "graph", "procurement")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[3] == "flowchart LR"


def test_graph_takes_the_format_from_the_file_suffix(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "procurement.dot"
    result = sagalog(project, "flows", "graph", "procurement", "--version", "1", "-o", str(target))
    assert result.exit_code == 0, result.output
    assert target.read_text().startswith('digraph "procurement v1" {')
    assert f"wrote procurement v1 as dot to {target}" in result.stderr
    forced = tmp_path / "graph.txt"
    result = sagalog(project, "flows", "graph", "procurement", "--format", "dot", "-o", str(forced))
    assert result.exit_code == 0 and forced.read_text().startswith("digraph")


def test_graph_of_an_unknown_flow_or_version_exits_2(project: Path) -> None:
    result = sagalog(project, "flows", "graph", "sales")
    assert result.exit_code == 2
    assert "no flow 'sales' is loaded (flows: filing, procurement)" in result.stderr
    result = sagalog(project, "flows", "graph", "procurement", "--version", "4")
    assert result.exit_code == 2
    assert "flow 'procurement' v4 is not loaded (loaded: v1)" in result.stderr


def test_graph_refuses_a_broken_flow_but_not_for_another_ones_problems(project: Path) -> None:
    text = flow_file(project).read_text()
    flow_file(project, 2).write_text(
        text.replace("version: 1", "version: 2").replace("deadline: 5d", "deadline: soon")
    )
    result = sagalog(project, "flows", "graph", "procurement", "--version", "1")
    assert result.exit_code == 0, result.output
    result = sagalog(project, "flows", "graph", "procurement")
    assert result.exit_code == 2
    assert "procurement.v2.yaml: flow 'procurement' v2, field 'deadline'" in result.stderr
    assert "fix procurement before drawing it" in result.stderr


REFERENCE_AGENTS = (
    *("intake", "retrieval", "risk", "budget", "purchasing", "notification"),
    *("records", "drafting", "submission"),  # the filing flow's
)


def test_check_with_agents_confirms_each_fits_its_steps(
    project: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PURCHASING_AGENT_GATE_SECRET", "unit-test-gate-secret-0123456789")
    agents = [arg for name in REFERENCE_AGENTS for arg in ("--agent", f"{name}_agent.agent")]
    result = sagalog(project, "flows", "check", "--path", str(repo_root / "services"), *agents)
    assert result.exit_code == 0, result.output
    assert "ok  agent budget-agent (budget_agent.agent): fits steps reserve_budget" in result.stdout
    assert (
        "ok  agent drafting-agent (drafting_agent.agent): fits steps draft_filing" in result.stdout
    )
    assert len([line for line in result.stdout.splitlines() if "ok  agent " in line]) == 9


def test_check_refuses_an_agent_that_does_not_fit_naming_agent_flow_and_step(
    project: Path, tmp_path: Path
) -> None:
    modules = tmp_path / "agents"
    modules.mkdir()
    (modules / "misfit_budget.py").write_text(
        "from procurement.events import BudgetReserved, RequestSubmitted\n"
        "from sagalog.agents.declaration import Agent\n"
        "agent = Agent('budget-agent')\n"
        "@agent.handles(step='reserve_budget')\n"
        "async def reserve(event: RequestSubmitted, ctx) -> BudgetReserved: ...\n"
    )
    result = sagalog(project, "flows", "check", "--path", str(modules), "--agent", "misfit_budget")
    assert result.exit_code == 2
    errors = result.stderr.splitlines()
    assert errors[0] == "error: agent 'budget-agent' does not fit its flows:"
    assert errors[1].startswith(
        "  flow procurement v1, step 'reserve_budget': the flow undoes it ('release_budget'"
    )
    assert errors[2].startswith(
        "  flow procurement v1, step 'reserve_budget': reserve takes "
        "procurement.v1.RequestSubmitted, but the flow starts the step on "
        "procurement.v1.RiskScored"
    )


def test_check_names_an_agent_module_it_cannot_import(project: Path) -> None:
    result = sagalog(project, "flows", "check", "--agent", "no_such_agent_module")
    assert result.exit_code == 2
    assert "cannot import agent module 'no_such_agent_module'" in result.stderr


def test_run_agent_refuses_to_start_an_agent_that_does_not_fit(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = tmp_path / "agents"
    modules.mkdir()
    (modules / "unstartable_budget.py").write_text(
        "from procurement.events import BudgetReserved, RiskScored\n"
        "from sagalog.agents.declaration import Agent\n"
        "agent = Agent('budget-agent')\n"
        "@agent.handles(step='reserve_budget')\n"
        "async def reserve(event: RiskScored, ctx) -> BudgetReserved: ...\n"
        "def refuse_to_run(settings=None):\n"
        "    raise AssertionError('started although it does not fit')\n"
        "agent.run = refuse_to_run\n"
    )
    monkeypatch.setenv("SAGALOG_AGENT_PROJECT_DIR", str(project))
    result = CliRunner().invoke(cli, ["run", "agent", "unstartable_budget", "--path", str(modules)])
    assert result.exit_code == 2, result.output
    assert "agent 'budget-agent' does not fit its flows:" in result.stderr
    assert "step 'reserve_budget': the flow undoes it" in result.stderr


def test_run_agents_refuses_to_start_any_when_one_does_not_fit(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = tmp_path / "agents"
    modules.mkdir()
    (modules / "fitting_intake.py").write_text(
        "from sagalog.agents.declaration import Agent\n"
        "agent = Agent('intake-agent')\n"
        "@agent.handles()\n"
        "async def classify_request(event, ctx): ...\n"
    )
    (modules / "unfit_budget.py").write_text(
        "from procurement.events import BudgetReserved, RiskScored\n"
        "from sagalog.agents.declaration import Agent\n"
        "agent = Agent('budget-agent')\n"
        "@agent.handles(step='reserve_budget')\n"
        "async def reserve(event: RiskScored, ctx) -> BudgetReserved: ...\n"
    )
    monkeypatch.setenv("SAGALOG_AGENT_PROJECT_DIR", str(project))
    result = CliRunner().invoke(
        cli, ["run", "agents", "fitting_intake", "unfit_budget", "--path", str(modules)]
    )
    assert result.exit_code == 2, result.output
    assert "agent 'budget-agent' does not fit its flows:" in result.stderr


def test_run_agents_refuses_the_same_agent_twice(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = tmp_path / "agents"
    modules.mkdir()
    (modules / "lonely.py").write_text(
        "from sagalog.agents.declaration import Agent\nagent = Agent('lonely-agent')\n"
    )
    monkeypatch.setenv("SAGALOG_AGENT_PROJECT_DIR", str(project))
    result = CliRunner().invoke(cli, ["run", "agents", "lonely", "lonely", "--path", str(modules)])
    assert result.exit_code == 2, result.output
    assert "an agent is named twice among ['lonely-agent', 'lonely-agent']" in result.stderr
