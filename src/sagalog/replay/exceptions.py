"""What can go wrong reading the log back, and what to do about it."""

from __future__ import annotations

from sagalog.errors import SagalogError
from sagalog.exit_codes import ExitCode


class ReplayError(SagalogError):
    """A topic cannot be replayed as asked: it does not exist, or reading it stalled.

    The message names the topic and the partitions concerned. Check the name with
    ``sagalog topology plan`` and the cluster with ``sagalog dev status``.
    """

    exit_code = ExitCode.CONFIGURATION


class StoreError(ReplayError):
    """The ``--store`` directory of a rebuild cannot be used as asked.

    It holds something other than a rebuild store, a rebuild of other inputs, or a
    store another run has open. Give a new directory (a rebuild only ever writes into
    its own), or delete the old one to start over.
    """
