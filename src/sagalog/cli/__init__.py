"""The ``sagalog`` command line."""
