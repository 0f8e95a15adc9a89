"""``sagalog budgets``: what each budget key has spent, and what is reserved now.

Spent is read from the log: every model call's ``EffectRecorded`` carries its budget
claims (``sagalog.budgets``), so the workflow topics hold every instance's spending,
settled to what the model reported. Only today's records are read (the money window;
the token window is the last minute of it), found by timestamp, not by reading the
topic from its start. What is reserved now (calls sent and not answered yet) lives
in the agents until the answer comes; each instance serves it on ``/metrics``
(``sagalog_budget_tokens{kind="reserved"}``), which ``--agent`` reads.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import closing

import click
from confluent_kafka import KafkaError, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from sagalog.assigned_reader import not_ours
from sagalog.audit.reading import audit_consumer, offset_at_time, partitions_of, watermarks
from sagalog.budgets.book import LedgerReport, Spend, claim_of, spent
from sagalog.budgets.ledger import DAY_MS, MICROS, MINUTE_MS
from sagalog.cli.context import Project, pass_project
from sagalog.cli.tables import print_table
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import header_dict
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import SagalogError, ServiceUnavailableError
from sagalog.events import EffectRecorded
from sagalog.metrics import BUDGET_TOKENS

RECORDED = EffectRecorded.event_type


@click.command()
@click.option(
    "--topic",
    "topics",
    multiple=True,
    required=True,
    help="A workflow topic the agents record their calls in (repeatable).",
)
@click.option(
    "--agent",
    "agent_urls",
    multiple=True,
    metavar="URL",
    help="An agent instance's health address (http://host:port), to add what it has "
    "reserved and not settled yet (repeatable).",
)
@pass_project
def budgets(project: Project, topics: tuple[str, ...], agent_urls: tuple[str, ...]) -> None:
    """Show each budget key's spending: tokens over the last minute and money today,
    as the models reported it, from every instance's records in the log.

    A call whose answer was lost (its agent died during it) counts at its estimate,
    shown as unanswered. Example:

      sagalog budgets --topic filings.events --agent http://drafting-agent-0:8081
    """
    now_ms = time.time_ns() // 1_000_000
    claims = [claim for topic in topics for claim in _claims(project, topic, now_ms)]
    reports = spent(claims, now_ms=now_ms)
    live = _reserved_now(agent_urls)
    if not reports and not live:
        click.echo(f"no model call under a budget today in {', '.join(topics)}")
        return
    rows = [_row(report, live.pop(report.ledger, 0)) for report in reports]
    rows += [
        (ledger, "0", "0", "0.000000", "0", str(int(tokens))) for ledger, tokens in live.items()
    ]
    print_table(
        ["budget key", "tokens/min", "unanswered", "money today", "calls today", "reserved now"],
        rows,
        right={1, 2, 3, 4, 5},
    )


def _row(report: LedgerReport, reserved_now: float) -> tuple[str, ...]:
    money = report.settled.micros + report.reserved.micros
    return (
        report.ledger,
        str(report.settled.tokens),
        str(report.reserved.tokens),
        f"{money / MICROS:.6f}",
        str(report.calls),
        str(int(reserved_now)),
    )


def _claims(project: Project, topic: str, now_ms: int) -> Iterator[Spend]:
    """The budget claims of ``topic``'s EffectRecorded events of today (and of the last
    minute, just after midnight)."""
    since = min(now_ms - now_ms % DAY_MS, now_ms - MINUTE_MS)
    settings = project.settings
    timeout = settings.connect_timeout_s
    codec = EventCodec(catalog=project.catalog, registry=SchemaRegistry(settings))
    with closing(audit_consumer(settings)) as consumer:
        ends: dict[int, int] = {}
        starts = []
        for partition in range(partitions_of(consumer, topic, timeout_s=timeout)):
            _, high = watermarks(consumer, topic, partition, timeout_s=timeout)
            start = offset_at_time(consumer, topic, partition, since, timeout_s=timeout)
            if start is not None and start < high:
                ends[partition] = high
                starts.append(TopicPartition(topic, partition, start))
        consumer.assign(starts)
        deadline = time.monotonic() + max(timeout, 60)
        while ends:
            if time.monotonic() > deadline:
                raise ServiceUnavailableError(
                    f"reading today's records of {topic} did not reach the end of "
                    f"partition(s) {sorted(ends)} in time"
                )
            for message in consumer.consume(500, 0.5):
                error = message.error()
                partition = int(message.partition() or 0)
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        ends.pop(partition, None)
                    elif not not_ours(error):
                        raise SagalogError(f"reading {topic}/{partition}: {error.str()}")
                    continue
                if int(message.offset() or 0) + 1 >= ends.get(partition, 0):
                    ends.pop(partition, None)
                if header_dict(message.headers()).get("ce_type") != RECORDED:
                    continue
                recorded = EffectRecorded.from_avro(codec.decode(message.value()).payload)
                yield from (claim_of(logged) for logged in recorded.spends or ())


def _reserved_now(urls: tuple[str, ...]) -> dict[str, float]:
    """Tokens the agents at ``urls`` have reserved and not settled, by budget key."""
    reserved: dict[str, float] = defaultdict(float)
    for url in urls:
        address = f"{url.rstrip('/')}/metrics"
        try:
            with urllib.request.urlopen(address, timeout=5) as reply:
                text = reply.read().decode()
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise ServiceUnavailableError(
                f"agent {url} did not answer at {address} ({exc}); is its health port set "
                "(SAGALOG_HEALTH_PORT) and the address right?"
            ) from exc
        for family in text_string_to_metric_families(text):
            if family.name != BUDGET_TOKENS.exported:
                continue
            for sample in family.samples:
                if sample.labels.get("kind") == "reserved":
                    reserved[sample.labels["ledger"]] += sample.value
    return dict(reserved)
