"""``python -m intake_agent``: run one instance of the intake agent."""

from intake_agent.agent import agent, settings
from sagalog.agents import run

run(agent, settings)
