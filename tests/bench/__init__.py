"""Benchmarks: commands that print figures, apart from the tests.

``python -m tests.bench`` (or ``make bench``) runs them and merges the figures into
``bench-results.json`` at the repository root. Speed is measured here and never
asserted in a timed test; ratios compare figures taken in the same run, on the same
broker, so a slow or busy machine shifts both sides alike.

No module here starts with ``test_``, so pytest never collects a benchmark.
"""
