"""Fault injection against the running platform, and a checker of what it recorded (issue 7)."""
