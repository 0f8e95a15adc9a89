"""``python -m records_agent``: run one instance of the records agent."""

from records_agent.agent import agent, settings
from sagalog import run_agent

run_agent(agent, settings)
