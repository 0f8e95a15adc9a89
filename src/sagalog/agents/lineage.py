"""Decision lineage for handlers that call a model.

An AI step's output is only auditable if it says which model decided, on which prompt
and from which inputs. ``DecisionLineage`` is a first-class part of such an event (an
Avro record field ``lineage`` of type ``sagalog.v1.DecisionLineage``), so the audit
trail answers "why was this request scored high-risk?" without a side database.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from sagalog.contracts.avro_from_model import record_schema


# Which model decided, with which parameters, on what prompt from which template, from
# which inputs (each by its hash, so the audit can tell a changed input). A comment, not a
# docstring: a docstring's first paragraph becomes the Avro record's doc, and the registry
# holds sagalog.v1.DecisionLineage without one. For the same reason the attribute
# docstrings below stay out of the schema (no use_attribute_docstrings).
class DecisionLineage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    avro_namespace: ClassVar[str] = "sagalog.v1"  # the platform's record in any event

    model_id: str
    prompt_hash: str
    input_refs: list[str]
    decided_at: dt.datetime
    parameters: dict[str, str] = Field(default_factory=dict)
    """The call's settings besides the messages (temperature, response format), each
    as JSON text: the same prompt at another temperature is another decision."""
    template_hash: str | None = None
    """The hash of the prompt's template (its fixed instructions), so decisions made
    under one version of the instructions can be told from another's."""
    input_hashes: dict[str, str] = Field(default_factory=dict)
    """``input_refs`` entries with the hash of the content the prompt was built from."""


LINEAGE_AVRO_TYPE = record_schema(DecisionLineage)
"""The Avro record of ``DecisionLineage``, as a ``lineage`` field's type."""


def prompt_hash(prompt: str | bytes) -> str:
    """A stable fingerprint of a prompt (or any input): sha256 of its UTF-8 bytes, hex."""
    data = prompt.encode("utf-8") if isinstance(prompt, str) else prompt
    return "sha256:" + hashlib.sha256(data).hexdigest()


def decision_lineage(
    *,
    model_id: str,
    prompt: str,
    input_refs: Sequence[str],
    decided_at: dt.datetime,
    parameters: Mapping[str, Any] | None = None,
    template: str | None = None,
    inputs: Mapping[str, str | bytes] | None = None,
) -> DecisionLineage:
    """Lineage of one model decision; ``input_refs`` name events or documents used,
    ``inputs`` the content of those the prompt was built from (hashed, not kept)."""
    return DecisionLineage(
        model_id=model_id,
        prompt_hash=prompt_hash(prompt),
        input_refs=list(input_refs),
        decided_at=decided_at,
        parameters={
            name: json.dumps(value, sort_keys=True, separators=(",", ":"))
            for name, value in (parameters or {}).items()
        },
        template_hash=None if template is None else prompt_hash(template),
        input_hashes={ref: prompt_hash(content) for ref, content in (inputs or {}).items()},
    )
