"""``python -m budget_agent``: run one instance of the budget agent."""

from budget_agent.agent import agent, settings
from sagalog.agents import run

run(agent, settings)
