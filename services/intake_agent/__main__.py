"""``python -m intake_agent``: run one instance of the intake agent."""

from intake_agent.agent import agent, settings
from sagalog import run_agent

run_agent(agent, settings)
