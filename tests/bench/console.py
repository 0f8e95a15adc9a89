"""The operator console at scale: its pages over a read model of 1,000,000 workflows.

What issue 47 asks ``make bench`` to show, measured on the real gateway HTTP server
(uvicorn, ``create_app``, its own process) over a real read model (RocksDB):

- ``console_overview_p95_ms``: ``/console``: counts by flow, version and state, the stuck
  list, the open gates;
- ``console_list_p95_ms``: ``/console/workflows``: the first page, newest first, and a
  page filtered by state (``console_list_state_p95_ms``);
- ``console_story_p95_ms``: one workflow's page whose story has 500 records, read from
  Kafka as ``sagalog audit`` reads them: 250 sealed events in its topic and the
  tracker's 250 transitions (a record lists at most ``SEALED_EVENTS`` = 256 sealed events,
  so 250 + 250 is the largest story a workflow shows whole). After the warm-up it is a
  story the gateway read once and keeps (``console.story_cache``), as a person looking
  again sees it; ``console_story_first_ms`` is its first view, read from Kafka;
- ``console_rss_mib_live_1000``: the gateway's resident memory with 1,000 live-update
  connections open (``/console/live``), against ``console_rss_mib_idle`` before them;
  the ``sagalog_gateway_live_connections`` gauge must read 1,000.

Each time is the request's round trip on the loopback interface, measured by the
client after a warm-up (one keep-alive connection, so no handshake is counted): the
server's time plus well under a millisecond. The goals are ≤ 100 ms for the lists and
≤ 300 ms for the story.

The 1,000,000 workflows are written straight into the store through the follower's own
``ReadModelBatch.put_record`` (what the follower does with each records-changelog
record, minus Kafka), from records the tracker's own rules made (``TrackerHarness``):
waiting at a gate, running, completed, compensated, their ids, keys and times varied.
Writing them takes minutes, so the store is kept (``--model-dir``) and reused by the
next run; the 500-record workflow is made again each run, on fresh topics.

``python -m tests.bench.console [--workflows 1000000] [--model-dir DIR]`` prints the
figures; ``make bench`` runs it too (``--skip-console`` leaves it out).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rocksdict import WriteBatch

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.hash_chain import chain_next, chain_start, content_hash, signed
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.subjects import subject_for
from sagalog.contracts.validation import to_avro_datum
from sagalog.events import StateTransition
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway import read_model
from sagalog.services.gateway.read_model import ReadModel, TransitionEntry
from sagalog.services.gateway.workflow_index import Facets, Index, time_suffix
from sagalog.settings import ClientSettings
from sagalog.tracker.record import SealedEvent, WorkflowRecord

REPO = Path(__file__).resolve().parents[2]
API_KEY = "bench-console-key"
SECRET = b"bench-console-gate-secret-32-b!!"
STORY_EVENTS = 250
"""Events of the story workflow; with one transition each, its story has 500 records."""
LIVE_CONNECTIONS = 1_000
EVENT_TYPES = (
    "procurement.v1.RequestClassified",
    "procurement.v1.PoliciesRetrieved",
    "procurement.v1.RiskScored",
    "procurement.v1.BudgetReserved",
)
"""Event types of the story (none holds personal data, so no key service is needed)."""


def _payload(event_type: str, n: int, now_ms: int) -> dict[str, Any]:
    """A payload of ``event_type`` such as the reference agents write (a model's decision
    with its lineage, a budget reservation), numbered ``n``."""
    request = f"PR-{n}"
    decided = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC)
    return {
        "procurement.v1.RequestClassified": {
            "request_id": request,
            "category": "hardware",
            "confidence": 0.9,
            "extracted": {"vendor": "Acme", "quantity": str(n)},
            "classifier": "classifier-2",
        },
        "procurement.v1.PoliciesRetrieved": {
            "request_id": request,
            "documents": [],
            "retriever": "policy-index",
        },
        "procurement.v1.RiskScored": {
            "request_id": request,
            "score": 0.2,
            "level": "LOW",
            "rationale": "a known vendor, an amount under the team's limit",
            "factors": [],
            "lineage": {
                "model_id": "risk-model-3",
                "prompt_hash": "sha256:" + "ab" * 32,
                "input_refs": [],
                "decided_at": decided,
            },
        },
        "procurement.v1.BudgetReserved": {
            "reservation_id": f"R-{n}",
            "cost_center": "it",
            "amount": "100.00",
            "currency": "EUR",
        },
    }[event_type]


BUILT = "bench-console-built"
"""A file in the store's directory: how many workflows it holds, once all are written."""


# -- the read model of a million workflows -----------------------------------------------


def _templates() -> list[WorkflowRecord]:
    """Records the tracker's own rules made, in the states a live deployment holds."""
    from tests.unit.gateway_fixtures import BEFORE_GATE, reference_flow, tracked

    catalog = SchemaCatalog.load(REPO / "schemas")
    flow = reference_flow(REPO, catalog)
    at_gate = tracked(flow, "template", *BEFORE_GATE).record("template")
    running = tracked(flow, "template", *BEFORE_GATE[:2]).record("template")
    ended = at_gate.model_copy(
        update={"current": None, "gate": None, "timers": (), "wake_ms": None}
    )
    return [
        at_gate,
        running,
        ended.model_copy(update={"state": WorkflowState.COMPLETED, "terminal_reason": "done"}),
        ended.model_copy(update={"state": WorkflowState.COMPLETED, "terminal_reason": "done"}),
        ended.model_copy(update={"state": WorkflowState.COMPLETED, "terminal_reason": "done"}),
        ended.model_copy(
            update={"state": WorkflowState.COMPENSATED, "terminal_reason": "budget refused"}
        ),
    ]


def _records(count: int, now_ms: int) -> Iterator[tuple[str, bytes]]:
    """``count`` stored records: a template each, with its own id, keys and times
    (started over the last 30 days, in order)."""
    stored = [t.to_stored() for t in _templates()]
    span_ms = 30 * 86_400_000
    for n in range(count):
        body = dict(stored[n % len(stored)])
        workflow_id = f"po-{n:07d}"
        started = now_ms - span_ms + n * span_ms // count
        body["workflow_id"] = workflow_id
        body["keys"] = {name: f"{name}-{n}" for name in body.get("keys") or {"request_id": ""}}
        body["started_at_ms"] = started
        body["entered_current_state_at_ms"] = started + 60_000 * (n % 50)
        body["last_event_at_ms"] = body["entered_current_state_at_ms"]
        yield workflow_id, json.dumps(body).encode()


def _entries(workflow_id: str, value: bytes, record: WorkflowRecord) -> list[tuple[bytes, bytes]]:
    """What ``ReadModelBatch.put_record`` writes for a new workflow, without parsing
    ``value`` again: ``record`` is its template, whose state, flow and gate it shares.
    (``_check_entries`` holds this to what the follower's code writes.)"""
    body = json.loads(value)
    key = workflow_id.encode()
    found = [
        (read_model._RECORD + key, value),
        (read_model._state_key(record.state.value, workflow_id), b""),
    ]
    found += [(read_model._key_prefix(n, v) + key, b"") for n, v in body["keys"].items()]
    if read_model._awaits_person(record):
        found.append((read_model._GATE + key, b""))
    facets = Facets(
        state=record.state,
        flow=record.flow,
        flow_version=record.flow_version,
        started_ms=body["started_at_ms"],
        entered_ms=body["entered_current_state_at_ms"],
    ).encode()
    found.append((Index.START.prefix + time_suffix(body["started_at_ms"], workflow_id), facets))
    if not record.is_terminal:
        idle = time_suffix(body["entered_current_state_at_ms"], workflow_id)
        found.append((Index.IDLE.prefix + idle, facets))
    return found


def _check_entries(scratch: Path, now_ms: int) -> None:
    """The fast writer's entries are exactly the follower's, for one of each template."""
    templates = _templates()
    sample = list(_records(len(templates) * 3, now_ms))
    model = ReadModel(scratch)
    try:
        batch = model.batch()
        for workflow_id, value in sample:
            batch.put_record(workflow_id, value)
        batch.commit()
        written = {
            bytes(k): bytes(v)
            for k, v in model.db.items()
            if not bytes(k).startswith(read_model._LAYOUT)
        }
    finally:
        model.close()
    fast = {}
    for n, (workflow_id, value) in enumerate(sample):
        fast.update(_entries(workflow_id, value, templates[n % len(templates)]))
    assert fast == written, sorted(set(fast.items()) ^ set(written.items()))[:4]


def build_read_model(path: Path, count: int, *, now_ms: int) -> float:
    """Write ``count`` workflows into the store at ``path`` (unless it holds them already);
    the seconds it took (0 when reused).

    The follower's ``put_record`` parses each record to index it, about 0.3 ms of CPU:
    for a million, the entries are written straight from the template each record is
    made from (``_entries``), after ``_check_entries`` proved them the same."""
    marker = path / BUILT
    if marker.exists() and marker.read_text().strip() == str(count):
        return 0.0
    if path.exists():
        shutil.rmtree(path)
    started = time.monotonic()
    scratch = path.with_name(path.name + ".check")
    shutil.rmtree(scratch, ignore_errors=True)
    _check_entries(scratch, now_ms)
    shutil.rmtree(scratch)
    templates = _templates()
    model = ReadModel(path)
    try:
        batch = WriteBatch(raw_mode=True)
        for n, (workflow_id, value) in enumerate(_records(count, now_ms)):
            for key, entry in _entries(workflow_id, value, templates[n % len(templates)]):
                batch.put(key, entry)
            if n % 10_000 == 9_999:
                model.db.write(batch)
                batch = WriteBatch(raw_mode=True)
            if n % 100_000 == 99_999:
                print(f"  read model: {n + 1:,} of {count:,} workflows", file=sys.stderr)
        model.db.write(batch)
    finally:
        model.close()
    marker.write_text(str(count))
    return time.monotonic() - started


# -- the workflow with a 500-record story ------------------------------------------------


def add_story_workflow(path: Path, settings: ClientSettings, *, now_ms: int) -> dict[str, str]:
    """A workflow whose 250 events and 250 transitions are in the log (fresh topics), and
    its record and history in the store, as the tracker and the follower leave them."""
    tag = uuid.uuid4().hex[:8]
    topic, transitions = f"bench-console-{tag}", f"bench-console-{tag}.transitions"
    admin = AdminClient(settings.kafka_config())
    for created in admin.create_topics(
        [NewTopic(topic, 1, 1), NewTopic(transitions, 1, 1)]
    ).values():
        created.result(30)
    catalog = SchemaCatalog.load(REPO / "schemas")
    registry = SchemaRegistry(settings)
    codec = EventCodec(catalog=catalog, registry=registry)
    for event_type in EVENT_TYPES:
        registry.register(subject_for(topic, event_type), catalog[event_type])
    registry.register(
        subject_for(transitions, StateTransition.event_type), catalog[StateTransition.event_type]
    )
    workflow_id = f"story-{tag}"
    key = workflow_id.encode()
    producer = Producer(settings.producer_config(**{"linger.ms": 5}))
    offsets: dict[str, int] = {}
    failures: list[str] = []

    def delivered(record_id: str) -> Any:
        """The delivery report of one record: its offset (a report carries no headers)."""

        def report(err: Any, message: Any) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                offsets[record_id] = message.offset()

        return report

    event_ids = [f"{workflow_id}-e{n:03d}" for n in range(STORY_EVENTS)]
    hashes: dict[str, str] = {}
    for n, event_id in enumerate(event_ids):
        event_type = EVENT_TYPES[n % len(EVENT_TYPES)]
        payload = _payload(event_type, n, now_ms)
        value = codec.encode(
            topic,
            event_type,
            to_avro_datum(catalog[event_type].definition, payload, event_type=event_type),
        )
        headers = EventHeaders(
            id=event_id,
            type=event_type,
            source="bench/console",
            workflow_id=workflow_id,
            time=dt.datetime.fromtimestamp((now_ms - 3_600_000 + n * 1000) / 1000, dt.UTC),
            causation_id=event_ids[n - 1] if n else None,
        ).to_kafka()
        headers = signed(key, value, headers)
        hashes[event_id] = content_hash(key, value, headers)
        producer.produce(
            topic, key=key, value=value, headers=headers, on_delivery=delivered(event_id)
        )
    if producer.flush(60) or failures:
        raise RuntimeError(f"the story's events were not all written: {failures[:3]}")
    states = ("running", "pending_approval")
    entries: list[tuple[TransitionEntry, int]] = []
    for n, event_id in enumerate(event_ids):
        at_ms = now_ms - 3_600_000 + n * 1000 + 100
        transition = StateTransition(
            flow="procurement",
            flow_version=1,
            from_state=states[n % 2],
            to_state=states[(n + 1) % 2],
            step=f"step-{n}",
            cause_event_id=event_id,
            time_in_previous_state_ms=1000,
            at=dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC),
        )
        value = codec.encode(transitions, StateTransition.event_type, transition.to_avro())
        transition_id = f"{event_id}-t"
        headers = EventHeaders(
            id=transition_id,
            type=StateTransition.event_type,
            source="sagalog/tracker",
            workflow_id=workflow_id,
            causation_id=event_id,
        ).to_kafka()
        producer.produce(
            transitions, key=key, value=value, headers=headers, on_delivery=delivered(transition_id)
        )
        entries.append(
            (
                TransitionEntry(
                    event_id=transition_id,
                    flow="procurement",
                    flow_version=1,
                    from_state=transition.from_state,
                    to_state=transition.to_state,
                    step=transition.step,
                    cause_event_id=event_id,
                    time_in_previous_state_ms=1000,
                    at_ms=at_ms,
                ),
                n,
            )
        )
    if producer.flush(60) or failures:
        raise RuntimeError(f"the story's records were not all written: {failures[:3]}")
    chain = chain_start(workflow_id)
    sealed = []
    for event_id in event_ids:
        chain = chain_next(chain, hashes[event_id])
        sealed.append(
            SealedEvent(
                topic=topic,
                partition=0,
                offset=offsets[event_id],
                event_id=event_id,
                hash=hashes[event_id],
            )
        )
    template = _templates()[1]
    record = template.model_copy(
        update={
            "workflow_id": workflow_id,
            "keys": {name: f"{name}-story-{tag}" for name in template.keys},
            "started_at_ms": now_ms - 3_600_000,
            "entered_current_state_at_ms": now_ms - 60_000,
            "chain": chain,
            "sealed": tuple(sealed),
            "state": WorkflowState.RUNNING,
        }
    )
    model = ReadModel(path)
    try:
        batch = model.batch()
        batch.put_record(workflow_id, json.dumps(record.to_stored()).encode())
        for entry, _ in entries:
            batch.add_transition(workflow_id, entry, partition=0, offset=offsets[entry.event_id])
        batch.commit()
    finally:
        model.close()
    return {"workflow_id": workflow_id, "topic": topic, "transitions_topic": transitions}


# -- the server ----------------------------------------------------------------------------


def serve(model_dir: Path, port: int, transitions_topic: str) -> None:
    """The gateway's app over the store, on uvicorn, as ``sagalog.services.gateway``
    serves it (no follower: the store does not move while it is measured)."""
    import uvicorn

    from sagalog.flows.loader import load_flows
    from sagalog.services.gateway import exported_metrics
    from sagalog.services.gateway.api import create_app
    from sagalog.services.gateway.application import Gateway
    from sagalog.services.gateway.console.routes import ConsoleOptions
    from sagalog.services.gateway.console.stories import LogStories
    from sagalog.services.gateway.follower import FollowerStatus
    from sagalog.topology.loader import load_topology

    _raise_file_limit()
    settings = ClientSettings()
    catalog = SchemaCatalog.load(REPO / "schemas")
    topology = load_topology(REPO / "topology", known_schemas=catalog)
    flows = load_flows(REPO / "topology" / "flows", catalog=catalog, topology=topology)
    codec = EventCodec(catalog=catalog, registry=SchemaRegistry(settings))
    model = ReadModel(model_dir)
    exported_metrics.export_live_connections(model)
    gateway = Gateway(
        model=model,
        publisher=None,  # type: ignore[arg-type]  # the pages measured publish nothing
        flows=flows,
        secret=SECRET,
        status=lambda: FollowerStatus(ready=True, health="ok", lag=0),
        follower_alive=lambda: True,
    )
    app = create_app(
        gateway,
        api_keys=[API_KEY.encode()],
        max_body_bytes=65_536,
        webhook_source="bench/console",
        console=ConsoleOptions(
            stories=LogStories(
                settings,
                codec=codec,
                transitions_topic=transitions_topic,
                timeout_s=settings.connect_timeout_s,
            ),
            live_heartbeat_s=600.0,
        ),
    )
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=2048)
    finally:
        model.close()


def _raise_file_limit() -> None:
    """1,000 live connections need more than the usual 1,024 descriptors on each side."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 8192) if hard != resource.RLIM_INFINITY else 8192
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _sign_in(client: httpx.Client) -> None:
    form = client.get("/console/sign-in")
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert token, "the sign-in page has no form token"
    done = client.post(
        "/console/sign-in",
        data={"api_key": API_KEY, "who": "bench", "csrf_token": token.group(1)},
    )
    assert done.status_code == 200 and done.url.path == "/console", (done.url, done.text[:300])


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[18]


def _timed(client: httpx.Client, path: str, *, rounds: int, expect: str) -> list[float]:
    for _ in range(3):  # warm: the first counts (version_counts) and the codec's schemas
        page = client.get(path)
        assert page.status_code == 200, f"{path}: {page.status_code} {page.text[:500]}"
        assert expect in page.text, f"{path} does not show {expect!r}"
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        page = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert page.status_code == 200, path
    return times


async def _open_live(base: str, cookies: httpx.Cookies, count: int) -> tuple[list[Any], Any]:
    """``count`` open live-update connections, each past its first message."""
    client = httpx.AsyncClient(
        base_url=base,
        cookies=cookies,
        timeout=httpx.Timeout(60.0),
        limits=httpx.Limits(max_connections=count + 10, max_keepalive_connections=0),
    )
    streams = []

    async def one() -> Any:
        request = client.build_request("GET", "/console/live", params={"since": "0"})
        response = await client.send(request, stream=True)
        assert response.status_code == 200, response.status_code
        chunks = response.aiter_text()
        first = await chunks.__anext__()
        assert first.startswith("retry:"), first
        return response, chunks  # the iterator too: dropping it would close the stream

    for start in range(0, count, 100):  # in waves: the accept queue is not the subject
        streams += await asyncio.gather(*(one() for _ in range(min(100, count - start))))
    return streams, client


def measure_console(
    settings: ClientSettings,
    *,
    workflows: int,
    model_dir: Path,
    rounds: int = 60,
    live: int = LIVE_CONNECTIONS,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    now_ms = int(time.time() * 1000)
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    built_s = build_read_model(model_dir, workflows, now_ms=now_ms)
    story = add_story_workflow(model_dir, settings, now_ms=now_ms)
    _raise_file_limit()
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.bench.console",
            "serve",
            "--model-dir",
            str(model_dir),
            "--port",
            str(port),
            "--transitions-topic",
            story["transitions_topic"],
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'services'}"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the bench gateway did not start") from None
                time.sleep(0.3)
        with httpx.Client(base_url=base, timeout=300, follow_redirects=True) as client:
            _sign_in(client)
            overview = _timed(client, "/console", rounds=rounds, expect="Workflows by state")
            listed = _timed(client, "/console/workflows", rounds=rounds, expect="po-")
            by_state = _timed(
                client, "/console/workflows?state=pending_approval", rounds=rounds, expect="po-"
            )
            story_path = f"/console/workflows/{story['workflow_id']}"
            started = time.perf_counter()
            page = client.get(story_path)
            first_story_ms = (time.perf_counter() - started) * 1000
            shown = len(re.findall(r'<li class="(?:event|transition)"', page.text))
            assert shown == 2 * STORY_EVENTS, f"the story shows {shown} records, not 500"
            told = _timed(client, story_path, rounds=max(rounds // 2, 20), expect='id="story"')
            idle_mib = _rss_mib(server.pid)

            async def hold() -> tuple[float, float, str]:
                streams, live_client = await _open_live(base, client.cookies, live)
                try:
                    await asyncio.sleep(2)
                    gauge = httpx.get(f"{base}/metrics").text
                    value = re.search(r"^sagalog_gateway_live_connections (\S+)$", gauge, re.M)
                    assert value, "the gauge is not exported"
                    return _rss_mib(server.pid), float(value.group(1)), gauge
                finally:
                    for response, chunks in streams:
                        await chunks.aclose()
                        await response.aclose()
                    await live_client.aclose()

            live_mib, gauge_value, gauge_text = asyncio.run(hold())
            assert gauge_value == live, f"the gauge reads {gauge_value}, not {live}: {gauge_text}"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        AdminClient(settings.kafka_config()).delete_topics(
            [story["topic"], story["transitions_topic"]]
        )
    results = {
        "console_workflows": workflows,
        "console_read_model_build_s": round(built_s, 1),
        "console_overview_p95_ms": round(_p95(overview), 1),
        "console_list_p95_ms": round(_p95(listed), 1),
        "console_list_state_p95_ms": round(_p95(by_state), 1),
        "console_story_records": 2 * STORY_EVENTS,
        "console_story_p95_ms": round(_p95(told), 1),
        "console_story_first_ms": round(first_story_ms, 1),
        "console_rss_mib_idle": round(idle_mib, 1),
        "console_rss_mib_live": round(live_mib, 1),
        "console_live_connections": live,
    }
    medians = {
        "overview": statistics.median(overview),
        "list": statistics.median(listed),
        "state": statistics.median(by_state),
        "story": statistics.median(told),
    }
    rows = [
        (
            "console read model",
            f"{workflows:,} workflows"
            + (f", written in {built_s:,.0f} s" if built_s else ", reused"),
        ),
        (
            "console overview",
            f"p95 {results['console_overview_p95_ms']} ms  "
            f"(p50 {medians['overview']:.1f}, goal ≤ 100)",
        ),
        (
            "console workflows page",
            f"p95 {results['console_list_p95_ms']} ms  (p50 {medians['list']:.1f}, goal ≤ 100)",
        ),
        (
            "  filtered by state",
            f"p95 {results['console_list_state_p95_ms']} ms  (p50 {medians['state']:.1f})",
        ),
        (
            "console 500-record story",
            f"p95 {results['console_story_p95_ms']} ms  (p50 {medians['story']:.1f}, goal ≤ 300)",
        ),
        ("  its first view", f"{results['console_story_first_ms']} ms (read from Kafka)"),
        (
            "gateway RSS",
            f"{idle_mib:,.0f} MiB idle, {live_mib:,.0f} MiB with {live:,} live connections",
        ),
    ]
    return results, rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.console", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="measure (the default)")
    for p in (parser, run):
        p.add_argument("--workflows", type=int, default=1_000_000)
        p.add_argument(
            "--model-dir",
            type=Path,
            default=None,
            help="where the store is kept between runs (default: .bench/console-<workflows>)",
        )
        p.add_argument("--rounds", type=int, default=60)
        p.add_argument("--live", type=int, default=LIVE_CONNECTIONS, help="connections to hold")
    server = sub.add_parser("serve", help="(internal) serve the store")
    server.add_argument("--model-dir", type=Path, required=True)
    server.add_argument("--port", type=int, required=True)
    server.add_argument("--transitions-topic", required=True)
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.model_dir, args.port, args.transitions_topic)
        return
    model_dir = args.model_dir or REPO / ".bench" / f"console-{args.workflows}"
    results, rows = measure_console(
        ClientSettings(),
        workflows=args.workflows,
        model_dir=model_dir,
        rounds=args.rounds,
        live=args.live,
    )
    for name, value in rows:
        print(f"{name:28} {value}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
