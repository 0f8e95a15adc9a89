"""``python -m budget_agent``: run one instance of the budget agent."""

from budget_agent.agent import agent, settings
from sagalog import run_agent

run_agent(agent, settings)
