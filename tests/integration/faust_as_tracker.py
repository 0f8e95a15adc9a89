"""A minimal faust app shaped like the tracker, run as a principal given in the environment.

``test_acls_secure`` starts it as ``User:saga-tracker`` with only the derived ACLs:
faust must create its changelog and assignor topics, join its group, read the
workflow topic, write its table and commit, with nothing else granted. The tracker
itself does not pass SASL settings to faust yet (see README, "Principals and ACLs").
"""

from __future__ import annotations

import os

import faust

app = faust.App(
    os.environ["FAUST_APP_ID"],
    broker=f"kafka://{os.environ['FAUST_BOOTSTRAP']}",
    broker_credentials=faust.SASLCredentials(
        username=os.environ["FAUST_USERNAME"],
        password=os.environ["FAUST_PASSWORD"],
        mechanism="SCRAM-SHA-512",
    ),
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
