"""The submission agent: submits the signed filing to the regulator.

Step ``submit_filing`` of ``topology/flows/filing.v2.yaml``: when the wait for the
officer's signature ends with it (``WaitEnded``), it submits the drafted filing to
the regulator (operation ``submit``, under the filing's own key) and publishes
``FilingSubmitted``. A submission cannot be taken back: its follow-up
``withdraw_filing`` sends a withdrawal notice (``FilingWithdrawn``).

Settings come from ``SUBMISSION_AGENT_*`` variables (``SubmissionAgentSettings``),
e.g. ``SUBMISSION_AGENT_REGULATOR_URL``. The image is ``deploy/images/agent.Dockerfile``
built with ``--build-arg AGENT=submission_agent``.
"""
