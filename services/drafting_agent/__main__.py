"""``python -m drafting_agent``: run one instance of the drafting agent."""

from drafting_agent.agent import agent, settings
from sagalog.agents import run

run(agent, settings)
