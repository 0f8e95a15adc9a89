"""The records agent: gathers a filing's source documents and puts them on legal hold.

Step ``retrieve_documents`` of ``topology/flows/filing.v2.yaml``: on ``FilingOpened``
it places a hold on the filer's documents in the records system (operation ``hold``)
and publishes ``DocumentsRetrieved`` with their text (a blob reference for a text over
``SAGALOG_BLOB_THRESHOLD_BYTES`` when a blob store is set); its compensation
``release_documents`` lifts the hold (``DocumentsReleased``).

Settings come from ``RECORDS_AGENT_*`` variables (``RecordsAgentSettings``), e.g.
``RECORDS_AGENT_RECORDS_URL``. The image is ``deploy/images/agent.Dockerfile`` built
with ``--build-arg AGENT=records_agent``.
"""
