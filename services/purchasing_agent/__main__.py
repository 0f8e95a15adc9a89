"""``python -m purchasing_agent``: run one instance of the purchasing agent."""

from purchasing_agent.agent import agent, settings
from sagalog import run_agent

run_agent(agent, settings)
