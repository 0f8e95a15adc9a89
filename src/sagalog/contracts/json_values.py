"""Avro values as JSON values, for what people and other tools read: the audit trail,
``sagalog tail``, the gateway's dead-letter pages and an effect's recorded arguments.

Pure, apart from the Kafka reader that ``sagalog tail`` is, so that an agent's handler
context (and the in-memory flow environment with it) need not load a Kafka client to
write a value down.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import uuid
from typing import Any


def jsonable(value: Any) -> Any:
    """Avro values as JSON values: decimals as strings (no float rounding), times as ISO-8601."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
