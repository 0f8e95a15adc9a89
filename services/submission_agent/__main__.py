"""``python -m submission_agent``: run one instance of the submission agent."""

from sagalog import run_agent
from submission_agent.agent import agent, settings

run_agent(agent, settings)
