"""The agent runtime's modules import one way: no cycle (that nothing below imports the
runtime is an import-linter contract in pyproject, run by ``test_dependency_direction``).

Read from the source (every ``import``, at module level, inside functions and under
``TYPE_CHECKING`` alike), so a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
AGENTS = SRC / "sagalog" / "agents"


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("sagalog.")}


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts)


def test_the_agent_runtime_has_no_import_cycle() -> None:
    modules = {module_of(p): p for p in AGENTS.glob("*.py") if p.name != "__init__.py"}
    graph = {name: imports_of(path) & modules.keys() for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            cycle = " -> ".join([*trail[trail.index(name) :], name])
            raise AssertionError(f"import cycle: {cycle}")
        if name in done:
            return
        for dependency in sorted(graph[name]):
            visit(dependency, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert "sagalog.agents.worker" not in graph["sagalog.agents.declaration"]


def test_the_facade_is_the_agent_api_and_nothing_internal() -> None:
    import sagalog.agents as facade

    assert set(facade.__all__) == {
        "Agent",
        "AgentSettings",
        "Budget",
        "BudgetRefused",
        "BudgetWait",
        "ChatModel",
        "DecisionLineage",
        "DependencyUnavailable",
        "HandlerContext",
        "HandlerError",
        "LoopResult",
        "NonRetryableError",
        "Price",
        "Priority",
        "RetryableError",
        "StepTimeout",
        "Tool",
        "ToolLoopError",
        "WorkflowContext",
        "decision_lineage",
        "post_chat",
        "prompt_hash",
        "run_agent",
        "run_tool_loop",
    }
    assert all(getattr(facade, name) is not None for name in facade.__all__)


def test_the_reference_agents_import_only_the_facade() -> None:
    services = SRC.parent / "services"
    for path in sorted(services.glob("*_agent/*.py")):
        internal = sorted(
            name
            for node in ast.walk(ast.parse(path.read_text()))
            for name in (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if name.startswith("sagalog.agents.")
        )
        assert not internal, f"{path.relative_to(services)} imports {internal}"
