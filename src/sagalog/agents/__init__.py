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
"""

from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent
from sagalog.agents.failures import (
    BudgetRefused,
    BudgetWait,
    DependencyUnavailable,
    HandlerError,
    NonRetryableError,
    RetryableError,
    StepTimeout,
)
from sagalog.agents.lineage import DecisionLineage, decision_lineage, prompt_hash
from sagalog.agents.model_client import ChatModel, post_chat
from sagalog.agents.running import run_agent
from sagalog.agents.settings import AgentSettings
from sagalog.agents.tool_loop import LoopResult, Tool, ToolLoopError, run_tool_loop
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.budgets.declaration import Budget
from sagalog.budgets.estimate import Price
from sagalog.priority import Priority

__all__ = [
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
]
