"""Does the log still hold what the tracker sealed? Pure checks, one finding per fault.

Three witnesses are compared (see ``sagalog.contracts.hash_chain``):

1. each event's **content** against its own ``sagalog_hash`` header;
2. the events found in the log against the **seal** in the workflow's record: the
   hashes and the order in which the tracker read them, and its chain head;
3. the **links** the log holds itself: an agent's ``sagalog_prev_hash`` must be its
   cause's hash, and every ``sagalog_chain`` the tracker (or the gateway) stamped
   must be a chain value the log recomputes *before* that event. These hold without
   the record, so a forger must rewrite every later tracker event as well.

Findings name the event (id and position) and say what is wrong:

- ``modified``: its content does not hash to its own header, or not to what the
  tracker sealed at that place;
- ``missing``: the tracker sealed it, the log no longer has it;
- ``reordered``: the log holds two sealed events in the other order;
- ``inserted``: the log holds an event of the workflow among the sealed ones that
  the tracker never read;
- ``broken_link``: a prev-hash or chain link points at nothing the log holds (the
  first one only: every later tracker event inherits the break);
- ``seal_mismatch``: the record's own chain does not recompute (the record changed);
- ``blob_missing``, ``blob_modified``: a payload the event holds by reference is not in
  the blob store as written (``audit.blobs``).

An event of the workflow after the last sealed one is not a finding: the tracker
may simply not have read it yet (it is reported as a note).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from sagalog.audit.lookup import WorkflowSeal
from sagalog.audit.reading import LoggedEvent
from sagalog.contracts.hash_chain import chain_next, chain_start, chain_values, content_hash
from sagalog.contracts.headers import H_CAUSATION_ID, H_CHAIN, H_HASH, H_ID, H_PREV_HASH


class FindingKind(enum.StrEnum):
    MODIFIED = "modified"
    MISSING = "missing"
    REORDERED = "reordered"
    INSERTED = "inserted"
    BROKEN_LINK = "broken_link"
    SEAL_MISMATCH = "seal_mismatch"
    BLOB_MISSING = "blob_missing"
    BLOB_MODIFIED = "blob_modified"


@dataclass(frozen=True)
class Finding:
    """One fault, naming the event it concerns (``event_id``, ``position``)."""

    kind: FindingKind
    event_id: str | None
    position: str | None
    message: str
    other_event_id: str | None = None  # the second event of a reordered pair or a link


@dataclass(frozen=True)
class Verification:
    """The findings and what was checked."""

    findings: tuple[Finding, ...]
    events_checked: int
    transitions_checked: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.findings


def verify(
    workflow: WorkflowSeal,
    events: Sequence[LoggedEvent],
    transitions: Sequence[LoggedEvent] = (),
) -> Verification:
    """Check ``events`` (the workflow's records in log order) and ``transitions``
    against each other and against what ``workflow`` sealed."""
    findings: list[Finding] = []
    notes: list[str] = []
    base = workflow.chain_base or chain_start(workflow.workflow_id)
    findings += _seal_consistency(workflow, base)
    hashes = [content_hash(e.key, e.value, e.headers) for e in events]
    matched = _match(workflow, events)
    modified = _modified(workflow, events, hashes, matched)
    findings += modified.values()
    findings += _missing(workflow, matched)
    findings += _reordered(workflow, events, matched)
    findings += _inserted(events, matched, notes)
    findings += _cause_links(events, hashes, skip=set(modified))
    chain = _log_chain(base, hashes, matched)
    findings += _chain_links(events, chain, label="event")
    for move in transitions:
        stated = move.header_values.get(H_HASH)
        actual = content_hash(move.key, move.value, move.headers)
        if stated is not None and stated != actual:
            findings.append(
                Finding(
                    FindingKind.MODIFIED,
                    move.header_values.get(H_ID),
                    move.position,
                    "transition's content does not match its own sagalog_hash",
                )
            )
    findings += _chain_links(transitions, chain, label="transition")
    if workflow.dropped:
        notes.append(
            f"{workflow.dropped} older sealed event(s) are no longer listed in the record; "
            "they are covered by the chain but not checked one by one"
        )
    return Verification(tuple(findings), len(events), len(transitions), tuple(notes))


def _seal_consistency(workflow: WorkflowSeal, base: str) -> list[Finding]:
    if workflow.chain is None:
        return []
    try:
        values = chain_values(base, (s.hash for s in workflow.sealed))
    except ValueError:
        values = []
    head = values[-1] if values else base
    if head == workflow.chain:
        return []
    return [
        Finding(
            FindingKind.SEAL_MISMATCH,
            None,
            None,
            f"the record's sealed hashes recompute to chain {head[:16]}..., not to its "
            f"chain head {workflow.chain[:16]}...: the record ({workflow.source}) was changed",
        )
    ]


def _match(workflow: WorkflowSeal, events: Sequence[LoggedEvent]) -> dict[int, int]:
    """Log index -> sealed index, by event id (the n-th occurrence to the n-th seal)."""
    by_id: dict[str, list[int]] = {}
    for index, sealed in enumerate(workflow.sealed):
        by_id.setdefault(sealed.event_id, []).append(index)
    matched: dict[int, int] = {}
    for index, event in enumerate(events):
        candidates = by_id.get(event.header_values.get(H_ID, ""))
        if candidates:
            matched[index] = candidates.pop(0)
    return matched


def _modified(
    workflow: WorkflowSeal,
    events: Sequence[LoggedEvent],
    hashes: list[str],
    matched: dict[int, int],
) -> dict[int, Finding]:
    found: dict[int, Finding] = {}
    for index, event in enumerate(events):
        reasons = []
        stated = event.header_values.get(H_HASH)
        if stated is not None and stated != hashes[index]:
            reasons.append("its content does not match its own sagalog_hash")
        sealed_index = matched.get(index)
        if sealed_index is not None:
            sealed = workflow.sealed[sealed_index]
            if sealed.hash != hashes[index]:
                reasons.append(
                    f"it differs from what the tracker sealed as event #{sealed_index + 1} "
                    f"at {sealed.topic}/{sealed.partition}@{sealed.offset}"
                )
        if reasons:
            found[index] = Finding(
                FindingKind.MODIFIED,
                event.header_values.get(H_ID),
                event.position,
                f"{_name(event)} was modified: {'; '.join(reasons)}",
            )
    return found


def _missing(workflow: WorkflowSeal, matched: dict[int, int]) -> list[Finding]:
    seen = set(matched.values())
    return [
        Finding(
            FindingKind.MISSING,
            sealed.event_id,
            f"{sealed.topic}/{sealed.partition}@{sealed.offset}",
            f"event {sealed.event_id} (sealed as #{index + 1} at {sealed.topic}/"
            f"{sealed.partition}@{sealed.offset}, hash {sealed.hash[:16]}...) is missing from "
            "the log",
        )
        for index, sealed in enumerate(workflow.sealed)
        if index not in seen
    ]


def _reordered(
    workflow: WorkflowSeal, events: Sequence[LoggedEvent], matched: dict[int, int]
) -> list[Finding]:
    found = []
    previous: int | None = None
    for index in sorted(matched):
        if previous is not None and matched[index] < matched[previous]:
            first, then = events[previous], events[index]
            found.append(
                Finding(
                    FindingKind.REORDERED,
                    then.header_values.get(H_ID),
                    then.position,
                    f"{_name(then)} (sealed #{matched[index] + 1}) comes after {_name(first)} "
                    f"(sealed #{matched[previous] + 1}) in the log, but the tracker read it "
                    "first",
                    other_event_id=first.header_values.get(H_ID),
                )
            )
        previous = index
    return found


def _inserted(
    events: Sequence[LoggedEvent], matched: dict[int, int], notes: list[str]
) -> list[Finding]:
    last = max(matched, default=-1)
    found = []
    for index, event in enumerate(events):
        if index in matched:
            continue
        if index < last:
            found.append(
                Finding(
                    FindingKind.INSERTED,
                    event.header_values.get(H_ID),
                    event.position,
                    f"{_name(event)} lies among the sealed events, but the tracker never read it",
                )
            )
        else:
            notes.append(f"{_name(event)} is not sealed yet (the tracker may not have read it)")
    return found


def _cause_links(
    events: Sequence[LoggedEvent], hashes: list[str], *, skip: set[int]
) -> list[Finding]:
    """An agent's ``sagalog_prev_hash`` must be its cause's hash (cause in this history)."""
    index_of = {e.header_values.get(H_ID): i for i, e in enumerate(events)}
    found = []
    for event in events:
        prev = event.header_values.get(H_PREV_HASH)
        cause = index_of.get(event.header_values.get(H_CAUSATION_ID))
        if prev is None or cause is None or cause in skip or prev == hashes[cause]:
            continue
        found.append(
            Finding(
                FindingKind.BROKEN_LINK,
                event.header_values.get(H_ID),
                event.position,
                f"{_name(event)} reacts to {_name(events[cause])}, whose content hashes to "
                f"{hashes[cause][:16]}..., not to the {prev[:16]}... it linked to: the cause "
                "changed after it was consumed",
                other_event_id=events[cause].header_values.get(H_ID),
            )
        )
    return found


def _log_chain(base: str, hashes: list[str], matched: dict[int, int]) -> dict[int, str]:
    """The chain value *before* each log index, over the sealed events as the log holds
    them (their content now, in the log's order)."""
    before: dict[int, str] = {}
    chain = base
    for index, event_hash in enumerate(hashes):
        before[index] = chain
        if index in matched:
            chain = chain_next(chain, event_hash)
    before[len(hashes)] = chain
    return before


def _chain_links(
    records: Sequence[LoggedEvent], chain: dict[int, str], *, label: str
) -> list[Finding]:
    """Every stamped ``sagalog_chain`` must be a chain value the log reached before it
    (for a transition, on another topic: at any point). Reports the first break and
    counts the rest, which follow from it."""
    ends = len(chain) - 1
    found: Finding | None = None
    later = 0
    for index, record in enumerate(records):
        stamped = record.header_values.get(H_CHAIN)
        if stamped is None:
            continue
        limit = index if label == "event" else ends
        if any(chain[k] == stamped for k in range(limit + 1)):
            continue
        if found is None:
            found = Finding(
                FindingKind.BROKEN_LINK,
                record.header_values.get(H_ID),
                record.position,
                f"{label} {_name(record)} carries chain head {stamped[:16]}..., which the log "
                "before it does not hash to: an earlier event was changed, removed or moved",
            )
        else:
            later += 1
    if found is None:
        return []
    if later:
        found = Finding(
            found.kind,
            found.event_id,
            found.position,
            f"{found.message} ({later} later {label}(s) inherit the break)",
        )
    return [found]


def _name(event: LoggedEvent) -> str:
    headers = event.header_values
    kind = (headers.get("ce_type") or "?").rsplit(".", 1)[-1]
    return f"{kind} {headers.get(H_ID, '?')} at {event.position}"
