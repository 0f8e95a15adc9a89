"""Decision lineage for handlers that call a model.

An AI step's output is only auditable if it says which model decided, on which prompt
and from which inputs. ``DecisionLineage`` is a first-class part of such an event (an
Avro record field ``lineage`` of type ``sagalog.v1.DecisionLineage``), so the audit
trail answers "why was this request scored high-risk?" without a side database.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

LINEAGE_AVRO_TYPE = {
    "type": "record",
    "name": "DecisionLineage",
    "namespace": "sagalog.v1",
    "fields": [
        {"name": "model_id", "type": "string"},
        {"name": "prompt_hash", "type": "string"},
        {"name": "input_refs", "type": {"type": "array", "items": "string"}},
        {"name": "decided_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


class DecisionLineage(BaseModel):
    """Which model decided, on what prompt (by hash), from which inputs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_id: str
    prompt_hash: str
    input_refs: list[str]
    decided_at: dt.datetime


def prompt_hash(prompt: str) -> str:
    """A stable fingerprint of a prompt: sha256 of its UTF-8 bytes, hex."""
    return "sha256:" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def decision_lineage(
    *, model_id: str, prompt: str, input_refs: Sequence[str], decided_at: dt.datetime
) -> DecisionLineage:
    """Lineage of one model decision; ``input_refs`` name events or documents used."""
    return DecisionLineage(
        model_id=model_id,
        prompt_hash=prompt_hash(prompt),
        input_refs=list(input_refs),
        decided_at=decided_at,
    )
