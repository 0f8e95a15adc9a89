"""``python -m risk_agent``: run one instance of the risk agent."""

from risk_agent.agent import agent, settings
from sagalog import run_agent

run_agent(agent, settings)
