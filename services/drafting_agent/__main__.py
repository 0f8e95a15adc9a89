"""``python -m drafting_agent``: run one instance of the drafting agent."""

from drafting_agent.agent import agent, settings
from sagalog import run_agent

run_agent(agent, settings)
