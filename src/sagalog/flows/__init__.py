"""Workflow definitions as data: flows declared in ``topology/flows/*.yaml``, checked at load."""
