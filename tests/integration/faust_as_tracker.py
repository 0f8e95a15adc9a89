"""A minimal faust app shaped like the tracker, run as the principal of its ``SAGALOG_*``.

``test_acls_secure`` starts it as ``User:saga-tracker`` with only the derived ACLs:
faust must create its changelog and assignor topics, join its group, read the
workflow topic, write its table and commit, with nothing else granted. It reaches
the secure dev stack as the tracker does, through ``client_config`` (SASL_SSL with
the stack's CA), so what it proves holds for the tracker's own faust app.
"""

from __future__ import annotations

import os

import faust

from sagalog import client_config
from sagalog.settings import ClientSettings

settings = ClientSettings()
app = faust.App(
    os.environ["FAUST_APP_ID"],
    broker=client_config.faust_broker(settings),
    broker_credentials=client_config.faust_credentials(settings),
    store="rocksdb://",
    datadir=os.environ["FAUST_DATA_DIR"],
    web_enabled=False,
    topic_partitions=6,
    consumer_auto_offset_reset="earliest",
)
source = app.topic(
    os.environ["FAUST_TOPIC"],
    key_type=bytes,
    value_type=bytes,
    key_serializer="raw",
    value_serializer="raw",
)
records = app.Table("records", partitions=6, key_type=bytes, value_type=bytes)


@app.agent(source, concurrency=1)
async def track(stream):  # type: ignore[no-untyped-def]
    async for event in stream.events():
        records[event.message.key or b""] = event.message.value


if __name__ == "__main__":
    app.main()
