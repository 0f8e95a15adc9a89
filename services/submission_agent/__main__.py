"""``python -m submission_agent``: run one instance of the submission agent."""

from sagalog.agents import run
from submission_agent.agent import agent, settings

run(agent, settings)
