"""The agent API: declare an agent, write its handlers, run it.

    from sagalog import Agent, AgentSettings, HandlerContext, NonRetryableError, run_agent

    agent = Agent("budget-agent")  # the flows name it on their steps

    @agent.handles(step="reserve_budget", dependencies=["ledger"])
    async def reserve(event: RiskScored, ctx: HandlerContext) -> BudgetReserved:
        ...

    run_agent(agent, AgentSettings())

This is what agent services import; ``__all__`` lists it. The runtime's modules
(``sagalog.agents.worker``, ``triage``, ``state_store``, ...) are internal: sagalog's
own code and tests import them by path, and they may change without notice.

The names load on first use (PEP 562), as ``sagalog``'s do: a declaration
(``sagalog.agents.declaration``, what ``Agent(...)`` is) must not load the worker and
its Kafka clients with it, so that a flow run in memory loads no Kafka runtime at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagalog.lazy_exports import LazyNames

if TYPE_CHECKING:
    from sagalog.agents.context import HandlerContext as HandlerContext
    from sagalog.agents.declaration import Agent as Agent
    from sagalog.agents.failures import BudgetRefused as BudgetRefused
    from sagalog.agents.failures import BudgetWait as BudgetWait
    from sagalog.agents.failures import DependencyUnavailable as DependencyUnavailable
    from sagalog.agents.failures import HandlerError as HandlerError
    from sagalog.agents.failures import NonRetryableError as NonRetryableError
    from sagalog.agents.failures import RetryableError as RetryableError
    from sagalog.agents.failures import StepTimeout as StepTimeout
    from sagalog.agents.lineage import DecisionLineage as DecisionLineage
    from sagalog.agents.lineage import decision_lineage as decision_lineage
    from sagalog.agents.lineage import prompt_hash as prompt_hash
    from sagalog.agents.model_client import ChatModel as ChatModel
    from sagalog.agents.model_client import post_chat as post_chat
    from sagalog.agents.running import run_agent as run_agent
    from sagalog.agents.settings import AgentSettings as AgentSettings
    from sagalog.agents.tool_loop import LoopResult as LoopResult
    from sagalog.agents.tool_loop import Tool as Tool
    from sagalog.agents.tool_loop import ToolLoopError as ToolLoopError
    from sagalog.agents.tool_loop import run_tool_loop as run_tool_loop
    from sagalog.agents.workflow_context import WorkflowContext as WorkflowContext
    from sagalog.budgets.declaration import Budget as Budget
    from sagalog.budgets.estimate import Price as Price
    from sagalog.priority import Priority as Priority


_names = LazyNames("sagalog.agents", globals())
__getattr__ = _names.getattr
__dir__ = _names.dir
