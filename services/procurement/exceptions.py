"""Errors of the procurement agents' shared code; each says which input to fix."""

from __future__ import annotations

from sagalog import ConfigurationError, SagalogError


class CorpusError(ConfigurationError):
    """A corpus file (labelled requests, policies, contracts) is malformed.

    The message names the file and line; fix it there. An agent refuses to start on
    a broken corpus rather than classify or retrieve from half of it.
    """


class ModelAnswerError(SagalogError):
    """A language model's answer is not the JSON the prompt asked for.

    Not retried: the risk agent falls back to its offline model and says so in the
    rationale, so a misbehaving model degrades the score's source, not the workflow.
    """
