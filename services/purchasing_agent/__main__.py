"""``python -m purchasing_agent``: run one instance of the purchasing agent."""

from purchasing_agent.agent import agent, settings

agent.run(settings)
