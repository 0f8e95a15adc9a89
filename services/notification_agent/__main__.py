"""``python -m notification_agent``: run one instance of the notification agent."""

from notification_agent.agent import agent, settings
from sagalog import run_agent

run_agent(agent, settings)
