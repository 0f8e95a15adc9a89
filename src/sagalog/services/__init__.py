"""The platform's own services, shipped in the wheel: the saga tracker and the gateway.

``sagalog run tracker`` and ``sagalog run gateway`` start them over a user's own
project (``python -m sagalog.services.tracker`` / ``...gateway`` do the same), so
``pip install sagalog`` is the whole platform; an agent is the user's code, run by
``sagalog run agent``. Each service is a process with one contract: its settings
class, ``/health/live`` and ``/health/ready``, and the exit codes of
``sagalog.exit_codes``.
"""
