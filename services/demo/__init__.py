"""The reference workflow end to end: the fleet of services, the request mix, the driver.

``python -m demo`` (what ``make demo`` runs); the end-to-end test reuses ``fleet``.
"""
