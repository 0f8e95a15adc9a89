"""The agent runtime: independent services that consume, handle and publish events."""
