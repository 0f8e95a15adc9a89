"""A handler reads a field that may hold a blob with ``ctx.content`` (``docs/blobs.md``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sagalog.agents.circuit_breaker import BreakerPolicy
from sagalog.agents.context import HandlerContext
from sagalog.agents.failures import NonRetryableError, is_retryable
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.state_store import StateStore
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.blobs.store import BlobMissing, BlobRef, LocalBlobStore
from sagalog.contracts.headers import EventHeaders

from .fakes import FakeClock


@pytest.fixture
def store(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    opened = StateStore(tmp_path / "db")
    yield opened
    opened.close()


def _context(state: StateStore, blobs: LocalBlobStore | None) -> HandlerContext:
    return HandlerContext(
        agent="filing-agent",
        step="draft",
        headers=EventHeaders(id="e1", type="t", source="s", workflow_id="wf-1"),
        attempt=1,
        workflow=WorkflowContext("wf-1"),
        store=state,
        flow=FlowControl(
            breaker_policy=BreakerPolicy(failure_threshold=5, open_for_s=10.0),
            rate_limits={},
            max_rate_wait_s=1.0,
            clock=FakeClock(),
        ),
        blobs=blobs,
    )


def test_inline_payloads_pass_through_and_references_are_read(
    state: StateStore, store: LocalBlobStore
) -> None:
    ctx = _context(state, store)
    text = store.put(b"a long prompt", "text/plain; charset=utf-8")
    image = store.put(b"\x89PNG", "image/png")

    assert ctx.content("short") == "short"
    assert ctx.content(None) is None
    assert ctx.content(text) == "a long prompt"
    assert ctx.content(text.as_avro()) == "a long prompt", "as the workflow's context holds it"
    assert ctx.content(image) == b"\x89PNG"


def test_a_reference_without_a_store_fails_the_step_naming_the_setting(
    state: StateStore, store: LocalBlobStore
) -> None:
    ref = store.put(b"x", "text/plain")

    with pytest.raises(NonRetryableError, match="agent filing-agent has no blob store") as caught:
        _context(state, None).content(ref)

    assert "SAGALOG_BLOB_DIR" in str(caught.value)


def test_a_changed_blob_is_not_retried_and_a_missing_one_is(
    state: StateStore, store: LocalBlobStore
) -> None:
    ctx = _context(state, store)
    ref = store.put(b"the prompt", "text/plain")
    store.path_of(ref).write_bytes(b"another prompt")

    with pytest.raises(NonRetryableError, match="was modified in the blob store"):
        ctx.content(ref)

    absent = BlobRef.of(b"never stored", "text/plain")
    with pytest.raises(BlobMissing) as caught:
        ctx.content(absent)
    assert is_retryable(caught.value), "a shared volume may not have it yet"
