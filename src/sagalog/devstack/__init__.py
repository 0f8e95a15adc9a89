"""The embedded development stack: Kafka (one node or a quorum of three) and Apicurio Registry.

For newcomers and CI on machines without Docker: ``sagalog dev up`` (or
``LocalStack(settings).up()``) fetches the pinned jars from Maven Central once,
starts the services detached, and waits until they answer. ``LocalStack(settings,
brokers=3, secure=True)`` is the three-node, TLS/SCRAM/mTLS variant;
``client_environment()`` is what its clients must be told.

Example:
    >>> from sagalog.devstack import DevStackSettings, LocalStack
    >>> stack = LocalStack(DevStackSettings(kafka_port=19092))
    >>> stack.up().bootstrap_servers                   # doctest: +SKIP
    '127.0.0.1:19092'
"""

from sagalog.devstack.reports import (
    ComponentStart,
    ComponentState,
    ComponentStatus,
    ComponentStop,
    DownReport,
    StackStatus,
    StartAction,
    UpReport,
)
from sagalog.devstack.settings import DevStackSettings
from sagalog.devstack.shape import StackShape
from sagalog.devstack.stack import LocalStack

__all__ = [
    "ComponentStart",
    "ComponentState",
    "ComponentStatus",
    "ComponentStop",
    "DevStackSettings",
    "DownReport",
    "LocalStack",
    "StackShape",
    "StackStatus",
    "StartAction",
    "UpReport",
]
