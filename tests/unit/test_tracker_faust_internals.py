"""The one adapter over faust's private attributes: it refuses to start when one is gone,
and none of its readers falls back to a default the watchdog would believe."""

from __future__ import annotations

import asyncio
from importlib import metadata
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from sagalog.errors import ConfigurationError, IncompatibleDependencyError
from sagalog.services.tracker import faust_internals
from sagalog.services.tracker.exits import exit_for
from sagalog.services.tracker.faust_internals import Need


def test_the_installed_faust_and_aiokafka_have_everything_the_tracker_needs() -> None:
    faust_internals.check_classes()


class _Annotated:
    _queue: int  # set in __init__ elsewhere, as mode's services declare theirs


class _Assigned:
    def __init__(self) -> None:
        self._position = None  # as aiokafka declares its attributes: only here


class _Derived(_Assigned):
    def _hook(self) -> None: ...


@pytest.mark.parametrize(
    ("cls", "name", "declared"),
    [
        (_Annotated, "_queue", True),
        (_Assigned, "_position", True),
        (_Derived, "_position", True),  # inherited from a base's __init__
        (_Derived, "_hook", True),
        (_Derived, "_positions", False),
        (_Annotated, "_queu", False),
    ],
)
def test_a_class_declares_an_attribute_by_value_annotation_or_init_assignment(
    cls: type, name: str, declared: bool
) -> None:
    assert faust_internals.declares(cls, name) is declared


def test_a_class_missing_a_need_refuses_the_start_naming_attribute_version_and_remedy() -> None:
    need = Need("_Derived", "_commit_offsets", "commit the offsets it finished itself")
    with pytest.raises(IncompatibleDependencyError) as caught:
        faust_internals.check_classes(
            [(_Annotated, Need("_Annotated", "_queue", "x")), (_Derived, need)]
        )
    message = str(caught.value)
    assert "_Derived has no attribute '_commit_offsets'" in message
    assert "commit the offsets it finished itself" in message
    assert f"faust-streaming {metadata.version('faust-streaming')}" in message
    assert "faust_internals.py" in message and "pip install" in message
    assert isinstance(caught.value, ConfigurationError) and caught.value.exit_code == 2


def test_a_missing_attribute_exits_without_a_restart_loop() -> None:
    error = IncompatibleDependencyError("aiokafka's consumer has no attribute '_fetcher'")
    decision = exit_for("faust's running consumer lacks what the tracker needs", error)
    assert (decision.code, decision.restart_helps) == (2, False)


def test_a_live_consumer_without_an_attribute_is_refused_before_ready() -> None:
    fetcher = SimpleNamespace(_records={}, _in_flight=set())
    kafka = SimpleNamespace(
        _isolation_level="read_uncommitted", _fetch_max_wait_ms=500, _subscription=None
    )
    app = SimpleNamespace(consumer=SimpleNamespace(_thread=SimpleNamespace(_consumer=kafka)))
    with pytest.raises(IncompatibleDependencyError, match=r"aiokafka's consumer .*'_fetcher'"):
        faust_internals.check_instances(app)
    kafka._fetcher = fetcher
    faust_internals.check_instances(app)


def test_fetch_settings_are_never_set_on_a_consumer_that_lacks_them() -> None:
    renamed = SimpleNamespace(_isolation="read_uncommitted", _fetch_max_wait_ms=500)
    with pytest.raises(IncompatibleDependencyError, match="_isolation_level"):
        faust_internals.configure_fetch(
            renamed, isolation_level="read_committed", fetch_max_wait_ms=100
        )
    assert not hasattr(renamed, "_isolation_level")  # no new attribute that changes nothing
    assert renamed._fetch_max_wait_ms == 500
    kafka = SimpleNamespace(_isolation_level="read_uncommitted", _fetch_max_wait_ms=500)
    faust_internals.configure_fetch(kafka, isolation_level="read_committed", fetch_max_wait_ms=100)
    assert (kafka._isolation_level, kafka._fetch_max_wait_ms) == ("read_committed", 100)


class _Queue:
    def __init__(self, size: int) -> None:
        self.size = size
        self._pending_pressure_drop_callbacks: set[Any] = set()

    def qsize(self) -> int:
        return self.size


def _app(*channels: Any) -> Any:
    return SimpleNamespace(topics=SimpleNamespace(_topics=list(channels)))


def test_queued_reads_the_queue_of_the_stream_on_the_topic() -> None:
    app = _app(
        SimpleNamespace(topics=("other",), _queue=_Queue(7)),
        SimpleNamespace(topics=("a.events", "app-clock"), _queue=_Queue(1234)),
    )
    assert faust_internals.queued(app, "app-clock") == 1234
    assert (
        faust_internals.queued(
            _app(SimpleNamespace(topics=("app-clock",), _queue=None)), "app-clock"
        )
        == 0
    )


def test_queued_raises_rather_than_answer_0_when_faust_renamed_its_channel_set() -> None:
    """An empty-looking queue tells the watchdog a busy worker is stalled."""
    with pytest.raises(AttributeError, match="_topics"):
        faust_internals.queued(SimpleNamespace(topics=SimpleNamespace(topics=[])), "app-clock")
    channel = SimpleNamespace(topics=("app-clock",), queue=_Queue(9))
    with pytest.raises(AttributeError, match="_queue"):
        faust_internals.queued(_app(channel), "app-clock")


def test_offsets_are_committed_as_given_and_the_answer_is_a_bool() -> None:
    committed: list[dict[Any, int]] = []

    async def commit(offsets: dict[Any, int]) -> int:
        committed.append(dict(offsets))
        return 1

    consumer = SimpleNamespace(_commit_offsets=commit, _committed_offset={"tp": 3})
    assert asyncio.run(faust_internals.commit_offsets(consumer, {"tp": 5})) is True
    assert committed == [{"tp": 5}]
    assert faust_internals.committed_offsets(consumer) == {"tp": 3}


def test_a_revoked_partition_gets_no_persisted_offset() -> None:
    persisted: dict[Any, int] = {}
    table = SimpleNamespace(
        data=SimpleNamespace(_dbs={0: object()}, set_persisted_offset=persisted.__setitem__)
    )
    faust_internals.persist_offset(table, TP("app-records-changelog", 0), 41)
    faust_internals.persist_offset(table, TP("app-records-changelog", 1), 42)
    assert persisted == {TP("app-records-changelog", 0): 41}
    assert faust_internals.open_db(table, 1) is None


def test_describe_names_each_layer_of_a_stalled_partition() -> None:
    tp = TP("a.events", 2)
    state = SimpleNamespace(paused=True, _position=10, highwater=20, lso=20)
    assignment = SimpleNamespace(tps=[tp], state_value=lambda _: state)
    kafka = SimpleNamespace(
        _subscription=SimpleNamespace(subscription=SimpleNamespace(assignment=assignment)),
        _fetcher=SimpleNamespace(_records={}, _in_flight={1}),
    )
    consumer = SimpleNamespace(
        _active_partitions={tp},
        _paused_partitions=set(),
        _buffered_partitions=set(),
        flow_active=True,
        _thread=SimpleNamespace(_consumer=kafka),
    )
    app = _app(SimpleNamespace(topics=("a.events",), _queue=_Queue(3)))
    app.consumer = consumer
    app.flow_control = SimpleNamespace(is_active=lambda: True)
    described = faust_internals.describe(app, [("a.events", 2)])["a.events/2"]
    assert described["faust_active"] and not described["faust_paused"]
    assert described["kafka_position"] == 10
    assert described["kafka_paused"] and described["kafka_in_flight"] == [1]
    assert described["stream_queues"] == [
        {"topics": ["a.events"], "size": 3, "pressure_callbacks": 0}
    ]


def test_the_service_refuses_to_start_with_the_message_before_anything_else(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sagalog.services.tracker.__main__ import main

    gone = Need("faust.transport.consumer.Consumer", "_commit_offsets", "commit its offsets")
    monkeypatch.setattr(faust_internals, "_class_needs", lambda: [(_Derived, gone)])
    monkeypatch.delenv("SAGALOG_TRACKER_GATE_SECRET", raising=False)  # checked after
    assert main() == 2
    assert "has no attribute '_commit_offsets', which the saga tracker needs" in (
        capsys.readouterr().err
    )
