"""The regulatory-filing workflow (``topology/flows/filing.v1.yaml``): its events.

The flow has no agent of its own: it waits for what outside systems report, the
document service through the gateway's signed webhook and the signing service by
publishing ``SignatureCaptured`` on ``filings.events``.
"""
