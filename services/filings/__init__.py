"""The regulatory-filing reference workflow (``topology/flows/filing.v2.yaml``): its
events and the domain code its agents share.

Documents are retrieved and put on legal hold (``records_agent``), a model drafts the
filing with tools under a token budget (``drafting_agent``), legal reviews it at a
gate, the officer's signature arrives from the signing service, and the filing is
submitted to the regulator (``submission_agent``). ``filing.v1.yaml`` is the earlier,
agentless flow that only waits for a document and a signature.
"""
