"""The procurement approval workflow: its events and, later, its agents."""
