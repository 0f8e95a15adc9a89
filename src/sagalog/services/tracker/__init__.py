"""The saga tracker service: faust feeding ``sagalog.tracker``'s rules.

Run one worker with ``python -m sagalog.services.tracker``.
"""
