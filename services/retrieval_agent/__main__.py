"""``python -m retrieval_agent``: run one instance of the retrieval agent."""

from retrieval_agent.agent import agent, settings
from sagalog import run_agent

run_agent(agent, settings)
