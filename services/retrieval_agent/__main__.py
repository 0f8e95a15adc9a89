"""``python -m retrieval_agent``: run one instance of the retrieval agent."""

from retrieval_agent.agent import agent, settings
from sagalog.agents import run

run(agent, settings)
