"""What-if replay: which recorded workflows would end differently under a candidate flow version.

Before a flow version is deployed, its effect on real histories can be computed:
every recorded workflow of the flow is run twice through the tracker's processor on
a simulated clock (``simulation``), with nothing published,

1. **baseline**: through the version it ran under, its recorded inputs at their
   recorded times (the journal's); this also measures when each entry started;
2. **candidate**: through the candidate, each input delivered as long after its
   entry starts as it came after it in the baseline; entries the recording never
   reached answered as ``--assume`` says (``assumptions``);

and the two endings are compared: state, the compensations requested, the tracker's
alerts about it and the SLA rules its own spans exceed. Comparing with the baseline
rather than the live record means both sides are computed the same way (a live
tracker fires timers on its ticks, the simulation at their due time); the report
still lists the workflows whose baseline does not end in their recorded state, so
a difference the simulation itself introduces is visible.

The log is read by a shadow reader: a consumer with a group id of its own that
assigns itself partitions and never commits, and no producer at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer

from sagalog.blobs.store import BlobStore
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import H_SOURCE, header_dict
from sagalog.errors import FlowDefinitionError
from sagalog.events import StateTransition
from sagalog.flows.model import Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.replay.assumptions import Assumption, assumption_for
from sagalog.replay.blobs import BlobReads
from sagalog.replay.chunks import ChunkReader, plan_ranges
from sagalog.replay.decoding import BatchDecoder
from sagalog.replay.engine import MAX_EXAMPLES, SkippedRecord
from sagalog.replay.exceptions import ReplayError
from sagalog.replay.journal import MemoryJournal, decisions_from
from sagalog.replay.processing import Unreadable, read_event
from sagalog.replay.reader import replay_consumer_config
from sagalog.replay.simulation import Cue, Ending, Run, Simulator, Trigger, trigger_of
from sagalog.settings import ClientSettings
from sagalog.tracker.actions import TRACKER_SOURCE
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.inputs import TrackedEvent


@dataclass
class History:
    """One workflow's recorded inputs, in log order, each with the tracker's clock then."""

    workflow_id: str
    inputs: list[tuple[TrackedEvent, int]] = field(default_factory=list)


@dataclass
class Recording:
    """What was read: the histories of a workflow topic and the journal about them."""

    topic: str
    histories: dict[str, History]
    journal: MemoryJournal
    blobs: BlobReads
    records: int = 0
    unreadable: int = 0
    examples: list[SkippedRecord] = field(default_factory=list)

    @property
    def horizon_ms(self) -> int:
        latest = max((t for h in self.histories.values() for _, t in h.inputs), default=0)
        return max(self.journal.horizon_ms, latest)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One workflow under its recorded version (baseline) and under the candidate."""

    workflow_id: str
    recorded_version: int
    recorded_state: str | None
    baseline: Ending
    candidate: Ending

    @property
    def changes(self) -> list[str]:
        return self.baseline.changes(self.candidate)

    @property
    def reproduced(self) -> bool:
        """Whether the baseline ends in the state the live tracker left it in."""
        return self.recorded_state is None or self.recorded_state == self.baseline.state

    def to_json(self) -> dict[str, object]:
        return {
            "workflow_id": self.workflow_id,
            "recorded_version": self.recorded_version,
            "recorded_state": self.recorded_state,
            "baseline": self.baseline.to_json(),
            "candidate": self.candidate.to_json(),
            "changes": self.changes,
        }


@dataclass
class WhatIfReport:
    candidate: Flow
    group_id: str
    recording: Recording
    assumed: Mapping[str, Assumption]
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    """Why a workflow was not replayed -> the workflow ids."""

    @property
    def changed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.changes]

    @property
    def not_reproduced(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.reproduced]


def read_recording(
    settings: ClientSettings,
    codec: EventCodec,
    *,
    topic: str,
    transitions_topic: str,
    flow_name: str,
    group_id: str,
    chunk_size: int = 10_000,
    blobs: BlobStore | None = None,
) -> Recording:
    """The workflow topic's histories, then the journal (transitions of ``flow_name``).

    The tracker's own output on the workflow topic is left out: what a version
    publishes is what is being recomputed. The blobs the events refer to are read
    from ``blobs`` (``replay.blobs``; None: counted, not read).

    Raises:
        ReplayError: the workflow topic does not exist.
    """
    consumer = Consumer(replay_consumer_config(settings, **{"group.id": group_id}))
    try:
        timeout = settings.connect_timeout_s
        ranges = plan_ranges(consumer, [topic], timeout_s=timeout)
        try:  # after the workflow topic: the journal then covers every event read
            journal_ranges = plan_ranges(consumer, [transitions_topic], timeout_s=timeout)
        except ReplayError:
            journal_ranges = []
        recording = Recording(
            topic=topic, histories={}, journal=MemoryJournal(), blobs=BlobReads(codec, blobs)
        )
        for chunk in ChunkReader(consumer, ranges, chunk_size=chunk_size).chunks():
            recording.blobs.see_all(chunk)
            for message in chunk:
                recording.records += 1
                read = read_event(codec, message.key(), message.value(), message.headers())
                if isinstance(read, Unreadable):
                    recording.unreadable += 1
                    if len(recording.examples) < MAX_EXAMPLES:
                        recording.examples.append(
                            SkippedRecord(
                                topic,
                                message.partition() or 0,
                                message.offset() or 0,
                                read.reason,
                            )
                        )
                    continue
                if not isinstance(read, TrackedEvent):
                    continue  # the tracker's own GateOpened / CompensationRequested
                if header_dict(message.headers()).get(H_SOURCE) == TRACKER_SOURCE:
                    continue  # a gate default's GateDecided: the version's own decision
                history = recording.histories.setdefault(
                    read.workflow_id, History(read.workflow_id)
                )
                history.inputs.append((read, 0))
        decoder = BatchDecoder(
            codec, event_types={StateTransition.event_type}, keys=True, logical_types=False
        )
        for chunk in ChunkReader(consumer, journal_ranges, chunk_size=chunk_size).chunks():
            for batch in decoder.decode(chunk):
                found = decisions_from(batch.payloads, batch.keys)
                recording.journal.add([d for d in found if d.flow == flow_name])
    finally:
        consumer.close()
    _time_inputs(recording)
    return recording


def _time_inputs(recording: Recording) -> None:
    """Each input's recorded time: the journal's, else the last one before it, else ce_time."""
    for history in recording.histories.values():
        last: int | None = None
        timed = []
        for event, _ in history.inputs:
            recorded = recording.journal.recorded(event.event_id)
            at = recorded.at_ms if recorded is not None else (last or event.time_ms)
            timed.append((event, at))
            last = at
        history.inputs = timed


def what_if(
    recording: Recording,
    *,
    candidate: Flow,
    registry: FlowRegistry,
    secret: bytes,
    retry: CompensationRetry,
    assumed: Mapping[str, Assumption],
    group_id: str = "",
) -> WhatIfReport:
    """Every recorded workflow of ``candidate``'s flow, under its version and the candidate."""
    horizon = recording.horizon_ms
    report = WhatIfReport(candidate, group_id, recording, assumed)
    tried = Simulator(candidate, secret=secret, retry=retry, horizon_ms=horizon)
    baselines: dict[int, Simulator] = {}
    for workflow_id, history in recording.histories.items():
        first = recording.journal.first.get(workflow_id)
        if first is None and history.inputs[0][0].event_type != candidate.starts_on:
            report.skipped.setdefault("not started by this flow", []).append(workflow_id)
            continue
        version = first.flow_version if first is not None else _latest(registry, candidate)
        try:
            flow = registry.get(candidate.name, version)
        except FlowDefinitionError:
            report.skipped.setdefault(f"v{version} is not loaded", []).append(workflow_id)
            continue
        if version not in baselines:
            baselines[version] = Simulator(flow, secret=secret, retry=retry, horizon_ms=horizon)
        baseline = baselines[version].run(workflow_id, _as_recorded(history))
        cues = _cues(flow, history, baseline)
        respond = _Unrecorded(tried, workflow_id, cues, baseline, assumed)
        run = tried.run(workflow_id, cues, respond)
        latest = recording.journal.latest.get(workflow_id)
        report.outcomes.append(
            Outcome(
                workflow_id=workflow_id,
                recorded_version=version,
                recorded_state=latest.to_state if latest is not None else None,
                baseline=baseline.ending,
                candidate=run.ending,
            )
        )
    return report


class _Unrecorded:
    """Answers the candidate's entries that the recording never reached (``--assume``).

    An entry with a recorded answer gets that (a cue); one the baseline reached
    without an answer stays silent, as recorded.
    """

    def __init__(
        self,
        simulator: Simulator,
        workflow_id: str,
        cues: list[Cue],
        baseline: Run,
        assumed: Mapping[str, Assumption],
    ) -> None:
        self.simulator = simulator
        self.workflow_id = workflow_id
        self.observed = {c.trigger for c in cues if c.trigger is not None} | set(baseline.starts)
        self.assumed = dict(assumed)

    def __call__(self, trigger: Trigger, at_ms: int) -> list[tuple[int, TrackedEvent]]:
        if trigger in self.observed:
            return []
        assumption = assumption_for(trigger[0], trigger[1], self.assumed)
        return self.simulator.answer(self.workflow_id, trigger, at_ms, assumption)


def shadow_group_id(candidate: Flow) -> str:
    """A consumer group of its own: it never meets, nor moves, any service's offsets."""
    return f"sagalog-whatif-{candidate.name}-v{candidate.version}-{uuid.uuid4().hex[:12]}"


def _as_recorded(history: History) -> list[Cue]:
    return [Cue(event, None, at) for event, at in history.inputs]


def _cues(flow: Flow, history: History, baseline: Run) -> list[Cue]:
    """Each input tied to the entry it answers, and how long after that entry started."""
    cues = []
    for event, at in history.inputs:
        trigger = trigger_of(flow, event)
        started = baseline.starts.get(trigger) if trigger is not None else None
        if trigger is None or started is None:
            cues.append(Cue(event, None, at))
        else:
            cues.append(Cue(event, trigger, at - started))
    return cues


def _latest(registry: FlowRegistry, candidate: Flow) -> int:
    versions = [v for v in registry.versions(candidate.name) if v != candidate.version]
    return versions[-1] if versions else candidate.version
