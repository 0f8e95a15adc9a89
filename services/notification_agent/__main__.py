"""``python -m notification_agent``: run one instance of the notification agent."""

from notification_agent.agent import agent, settings

agent.run(settings)
