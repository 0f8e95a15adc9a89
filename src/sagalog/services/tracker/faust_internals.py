"""Every private attribute of faust, mode and aiokafka the tracker relies on, in one place.

The tracker bends faust where its public API cannot serve (see ``transport``,
``store``, ``offsets``, ``app``): it commits the offsets it finished itself, writes
table partitions directly, reads committed data only, and, when a partition stalls,
logs what each layer believes. All of that reaches attributes faust does not
promise to keep, so the versions are pinned (pyproject) and every access goes
through a named function here, which says why it is needed.

A rename in a future release must not go unnoticed. Setting a renamed attribute
silently creates a new one (the consumer would read uncommitted data), a renamed
hook is silently never called, and a diagnostic that fell back to 0 once fed the
stall watchdog a queue that looked empty. So the tracker refuses to start instead:
``check_classes`` runs before faust starts and checks every need on the installed
classes (an attribute, a method, an annotation of one, or an assignment to it in
an ``__init__``); ``check_instances`` checks the live consumer's aiokafka objects
again before the service reports ready. Either raises
``IncompatibleDependencyError`` naming the attribute, the version found and what
to do; no accessor here falls back to a default.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from sagalog.errors import IncompatibleDependencyError

PINNED_IN = "pyproject.toml"


@dataclass(frozen=True)
class Need:
    """One attribute the tracker uses that its owner does not promise to keep.

    Attributes:
        owner: the class (or, for ``check_instances``, the label of the live object).
        name: the attribute.
        why: what the tracker does with it, for the message when it is gone.
    """

    owner: str
    name: str
    why: str


def _versions() -> str:
    found = []
    for dist in ("faust-streaming", "aiokafka", "mode-streaming"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist} not installed")
    return ", ".join(found)


def _missing(need: Need, where: str) -> IncompatibleDependencyError:
    return IncompatibleDependencyError(
        f"{where} has no attribute '{need.name}', which the saga tracker needs to "
        f"{need.why} (found {_versions()}); install the versions {PINNED_IN} pins "
        "(`pip install -e .`), or, upgrading on purpose, adapt "
        "src/sagalog/services/tracker/faust_internals.py to the new name"
    )


def declares(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base has ``name``: as an attribute, a class annotation, or
    an assignment ``self.<name> = ...`` in its ``__init__``.

    mode's services annotate the attributes their ``__init__`` sets; aiokafka only
    assigns them there. Either way a class can be checked before any instance exists.
    """
    if hasattr(cls, name):
        return True
    for klass in cls.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            return True
        init = vars(klass).get("__init__")
        if init is not None and _assigns(init, name):
            return True
    return False


def _assigns(init: Any, name: str) -> bool:
    try:
        source = inspect.getsource(init)
    except (OSError, TypeError):  # no source (a C extension, a .pyc-only install)
        return False
    return f"self.{name} =" in source or f"self.{name}:" in source


def check_classes(needs: Iterable[tuple[type, Need]] | None = None) -> None:
    """Refuse to start when an installed class lacks a need (the first one found).

    Raises:
        IncompatibleDependencyError: naming the class, the attribute and the versions.
    """
    for cls, need in _class_needs() if needs is None else needs:
        if not declares(cls, need.name):
            raise _missing(need, f"{cls.__module__}.{cls.__qualname__}")


def require(obj: Any, needs: Iterable[Need]) -> None:
    """Refuse to go on when the live ``obj`` lacks one of ``needs``.

    Raises:
        IncompatibleDependencyError: naming the object, the attribute and the versions.
    """
    for need in needs:
        if not hasattr(obj, need.name):
            raise _missing(need, f"{need.owner} ({type(obj).__module__}.{type(obj).__qualname__})")


def _class_needs() -> list[tuple[type, Need]]:
    """What the tracker needs of faust's and mode's classes (imported here, not at start)."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.consumer.fetcher import Fetcher
    from aiokafka.consumer.subscription_state import SubscriptionState, TopicPartitionState
    from faust import App
    from faust.channels import Channel
    from faust.stores.rocksdb import Store
    from faust.tables.manager import TableManager
    from faust.tables.recovery import Recovery
    from faust.transport.conductor import Conductor
    from faust.transport.consumer import Consumer, ThreadDelegateConsumer
    from faust.transport.drivers import aiokafka as driver
    from mode.utils.queues import FlowControlQueue

    def need(cls: type, name: str, why: str) -> tuple[type, Need]:
        return cls, Need(f"{cls.__module__}.{cls.__qualname__}", name, why)

    return [
        need(Consumer, "_commit_offsets", "commit the offsets it finished itself (offsets.py)"),
        need(Consumer, "_committed_offset", "log what faust committed when a partition stalls"),
        need(Consumer, "_active_partitions", "log faust's fetch set when a partition stalls"),
        need(Consumer, "_paused_partitions", "log faust's paused partitions on a stall"),
        need(Consumer, "_buffered_partitions", "log faust's buffered partitions on a stall"),
        need(Consumer, "_read_offset", "keep no read offsets: drop no record (transport.py)"),
        need(Consumer, "_reset_state", "keep no read offsets: drop no record (transport.py)"),
        need(ThreadDelegateConsumer, "_thread", "reach aiokafka's consumer for a stall's log"),
        need(
            driver.AIOKafkaConsumerThread,
            "_create_worker_consumer",
            "make its consumer read committed data only (transport.py overrides it)",
        ),
        need(
            driver.AIOKafkaConsumerThread,
            "_fetch_records",
            "hand over only records of active partitions (transport.py overrides it)",
        ),
        need(
            driver.AIOKafkaConsumerThread,
            "on_partitions_assigned",
            "keep aiokafka off the workflow partitions (transport.py overrides it)",
        ),
        need(
            driver.AIOKafkaConsumerThread,
            "verify_event_path",
            "spare the workflow partitions faust's fetch check (transport.py overrides it)",
        ),
        need(
            App,
            "on_rebalance_end",
            "start the tracker's input once a recovery completed (transport.py overrides it)",
        ),
        need(
            driver.Consumer,
            "_new_consumer_thread",
            "use its own consumer thread (transport.py overrides it)",
        ),
        need(
            driver.Producer,
            "_settings_extra",
            "make the changelog producer idempotent (transport.py overrides it)",
        ),
        need(App, "_new_transport", "use its own transport (transport.py overrides it)"),
        need(driver.AIOKafkaConsumerThread, "_consumer", "reach aiokafka's consumer"),
        need(AIOKafkaConsumer, "_isolation_level", "read committed data only (transport.py)"),
        need(AIOKafkaConsumer, "_fetch_max_wait_ms", "bound a fetch's wait (transport.py)"),
        need(AIOKafkaConsumer, "_subscription", "log aiokafka's assignment on a stall"),
        need(AIOKafkaConsumer, "_fetcher", "log aiokafka's fetch buffer on a stall"),
        need(SubscriptionState, "subscription", "log aiokafka's assignment on a stall"),
        need(TopicPartitionState, "_position", "log aiokafka's position on a stall"),
        need(Fetcher, "_records", "log aiokafka's buffered records on a stall"),
        need(Fetcher, "_in_flight", "log aiokafka's fetches in flight on a stall"),
        need(Store, "_dbs", "read a table partition's RocksDB without opening it (store.py)"),
        need(Store, "_db_for_partition", "write a table partition's RocksDB (store.py)"),
        need(Store, "set_persisted_offset", "record the changelog offsets faust restores from"),
        need(Store, "rocksdb_options", "put every table under one memory budget (rocks.py)"),
        need(Store, "offset_key", "keep faust's bookkeeping key out of the tracker's scans"),
        need(TableManager, "_recovery", "fence and restore through our Recovery (restore.py)"),
        need(Recovery, "_build_highwaters", "fence, then find the committed ends (restore.py)"),
        need(Recovery, "on_recovery_completed", "seek before records flow again (restore.py)"),
        need(Recovery, "_set_recovery_ended", "end a recovery as faust does (restore.py)"),
        need(Recovery, "actives_for_table", "complete the tables' recovery (restore.py)"),
        need(Recovery, "_is_changelog_tp", "tell stream partitions from changelogs (restore.py)"),
        need(Recovery, "completed", "say the recovery completed (restore.py)"),
        need(App, "_fetcher", "start the fetcher once the streams may flow (restore.py)"),
        need(Conductor, "_topics", "find the stream queue the stall watchdog measures"),
        need(Channel, "_queue", "measure a stream's queue without creating one"),
        need(
            FlowControlQueue,
            "_pending_pressure_drop_callbacks",
            "log a stream queue's back-pressure callbacks when a partition stalls",
        ),
    ]


# -- what only live objects show ---------------------------------------------------

AIOKAFKA_CONSUMER = (
    Need("aiokafka's consumer", "_isolation_level", "read committed data only (transport.py)"),
    Need("aiokafka's consumer", "_fetch_max_wait_ms", "bound a fetch's wait (transport.py)"),
    Need("aiokafka's consumer", "_subscription", "log aiokafka's assignment on a stall"),
    Need("aiokafka's consumer", "_fetcher", "log aiokafka's fetch buffer on a stall"),
)
AIOKAFKA_THREAD = (Need("faust's consumer thread", "_consumer", "reach aiokafka's consumer"),)
AIOKAFKA_FETCHER = (
    Need("aiokafka's fetcher", "_records", "log aiokafka's buffered records on a stall"),
    Need("aiokafka's fetcher", "_in_flight", "log aiokafka's fetches in flight on a stall"),
)


def check_instances(app: Any) -> None:
    """Check the needs of the running consumer's aiokafka objects, before ready.

    Raises:
        IncompatibleDependencyError: naming the object, the attribute and the versions.
    """
    thread = app.consumer._thread
    require(thread, AIOKAFKA_THREAD)
    kafka = thread._consumer
    require(kafka, AIOKAFKA_CONSUMER)
    require(kafka._fetcher, AIOKAFKA_FETCHER)


def configure_fetch(kafka: Any, *, isolation_level: str, fetch_max_wait_ms: int) -> None:
    """Set two settings faust hard-codes on the aiokafka consumer it created, before it
    starts (aiokafka builds its fetcher from them in ``start``; see ``transport``).

    Checked first: assigning a renamed attribute would create a new one and change
    nothing, and the tracker would read uncommitted data.
    """
    require(kafka, AIOKAFKA_CONSUMER[:2])
    kafka._isolation_level = isolation_level
    kafka._fetch_max_wait_ms = fetch_max_wait_ms


# -- recovery -----------------------------------------------------------------------


def use_recovery(app: Any, make: Callable[..., Any]) -> None:
    """Make the app's table manager restore with what ``make`` builds (a faust
    ``Recovery``, called as faust calls it), before anything asks for its recovery:
    faust creates one lazily."""
    tables = app.tables
    tables._recovery = make(app, tables, beacon=tables.beacon, loop=tables.loop)


# -- offsets ------------------------------------------------------------------------


async def commit_offsets(consumer: Any, offsets: Mapping[Any, int]) -> bool:
    """Commit ``offsets`` as given: faust's public commit goes through its acks and gap
    bookkeeping, which the tracker turned off (``offsets``); whether it committed."""
    return bool(await consumer._commit_offsets(offsets))


def committed_offsets(consumer: Any) -> dict[Any, int]:
    """What faust itself last committed, per ``TP``: for a stalled worker's log."""
    return dict(consumer._committed_offset)


# -- table storage --------------------------------------------------------------------


def open_db(table: Any, partition: int) -> Any:
    """The partition's RocksDB if this worker holds it, else ``None`` (never opens one:
    reading a partition not assigned or not restored must not create it)."""
    return table.data._dbs.get(partition)


def db_for_write(table: Any, partition: int) -> Any:
    """The partition's RocksDB, opened if needed, as faust's own ``__setitem__`` gets it."""
    return table.data._db_for_partition(partition)


def open_partitions(table: Any) -> set[int]:
    """The partitions whose RocksDB the table's store holds open."""
    return set(table.data._dbs)


def reopen_dbs(table: Any, partitions: set[int]) -> None:
    """Close and open again the RocksDB of each of ``partitions``: RocksDB refuses
    writes after one failed for want of space until it is opened again. Each is open
    again on return (a partition missing from the store reads as not held), or the
    open's error is raised and the caller tries again later with the same set."""
    store = table.data
    for partition in sorted(partitions):
        db = store._dbs.pop(partition, None)
        if db is not None:
            with contextlib.suppress(Exception):  # a close that flushes may fail alike
                db.close()
        store._db_for_partition(partition)


def persist_offset(table: Any, tp: Any, offset: int) -> None:
    """Record the changelog offset a partition's RocksDB holds up to, unless it was
    revoked meanwhile: faust restores from there, as its own send callback records."""
    store = table.data
    if tp.partition in store._dbs:
        store.set_persisted_offset(tp, offset)


def offset_key(table: Any) -> bytes:
    """The key under which faust keeps a partition's persisted changelog offset, in the
    same RocksDB as the table's keys: a scan over the tracker's keys must skip it."""
    return bytes(table.data.offset_key)


def set_rocksdb_options(table: Any, options: Any) -> None:
    """Give the table's store the options its RocksDBs open with (they open lazily)."""
    table.data.rocksdb_options = options


# -- what the watchdog and a stalled worker's log read ----------------------------------


def queued(app: Any, topic: str) -> int:
    """Records handed to the stream that reads ``topic`` and not yet taken by it.

    0 is the truth only where nothing can be queued: no channel reads ``topic`` yet
    (the agent subscribes as it starts) or its queue was never created (faust
    creates it on first use). A renamed attribute raises instead: a queue that looked
    empty would let the watchdog count a worker deep in a backlog as stalled.
    """
    for channel in app.topics._topics:
        queue = channel._queue  # not .queue: that would create one
        if queue is not None and topic in (channel.topics or ()):
            return int(queue.qsize())
    return 0


def describe(app: Any, keys: Iterable[tuple[str, int]]) -> dict[str, dict[str, Any]]:
    """What faust and aiokafka believe about each ``(topic, partition)`` in ``keys``.

    When the watchdog finds a partition whose committed records are not read, the
    worker exits; this snapshot names which layer holds it back: faust's fetch set
    (active, paused, buffered), aiokafka's subscription (paused, position) and its
    fetch buffer. Read from the worker's loop while the consumer thread runs: a
    diagnostic, not a consistent view.
    """
    consumer = app.consumer
    active = {(tp.topic, tp.partition) for tp in (consumer._active_partitions or ())}
    paused = {(tp.topic, tp.partition) for tp in consumer._paused_partitions}
    buffered = {(tp.topic, tp.partition) for tp in consumer._buffered_partitions}
    kafka = consumer._thread._consumer
    queues = _queues(app)
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(set(keys)):
        entry: dict[str, Any] = {
            "faust_active": key in active,
            "faust_paused": key in paused,
            "faust_buffered": key in buffered,
            "flow_active": consumer.flow_active,
            "app_flow_control": app.flow_control.is_active(),
            "stream_queues": queues,
        }
        if kafka is not None:
            entry.update(_kafka_state(kafka, key))
        out[f"{key[0]}/{key[1]}"] = entry
    return out


def _queues(app: Any) -> list[dict[str, Any]]:
    """Each subscribed channel's queue: records handed over by the fetcher, not yet taken."""
    return [
        {
            "topics": sorted(channel.topics or ()),
            "size": channel._queue.qsize(),
            "pressure_callbacks": len(channel._queue._pending_pressure_drop_callbacks),
        }
        for channel in app.topics._topics
        if channel._queue is not None
    ]


def _kafka_state(kafka: Any, key: tuple[str, int]) -> dict[str, Any]:
    assignment = kafka._subscription.subscription
    assignment = assignment.assignment if assignment is not None else None
    if assignment is None:
        return {"kafka": "no assignment"}
    match = [tp for tp in assignment.tps if (tp.topic, tp.partition) == key]
    if not match:
        return {"kafka_assigned": False}
    tp = match[0]
    state = assignment.state_value(tp)
    buffered = kafka._fetcher._records.get(tp)
    return {
        "kafka_assigned": True,
        "kafka_paused": state.paused,
        "kafka_position": state._position,
        "kafka_highwater": state.highwater,
        "kafka_lso": state.lso,
        "kafka_buffered": repr(buffered) if buffered is not None else None,
        "kafka_in_flight": sorted(kafka._fetcher._in_flight),
    }
