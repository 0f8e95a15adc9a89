"""``python -m intake_agent``: run one instance of the intake agent."""

from intake_agent.agent import agent, settings

agent.run(settings)
