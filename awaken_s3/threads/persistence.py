"""The thread store's algorithms, once, above each backend's few I/O methods.

As Powertools' idempotency utility keeps its protocol in ``BasePersistenceLayer`` and lets
each backend implement only reads and conditional writes, :class:`BaseThreadStore`
implements every operation of :mod:`awaken_s3.threads.base` (the retried create, the lease
writes and their "did my earlier attempt land?" checks, the commit with its diagnosis, the
lease-checked tool-call transactions, the sweeper's writes) over the four primitives of
:class:`~awaken_s3.threads.backend.StoreIO`. The operations are grouped by contract, one
module each: ``run_ops``, ``commit_ops``, ``ledger_ops``, ``sweep_ops``.
"""

from __future__ import annotations

from awaken_s3.threads.commit_ops import CommitOperations
from awaken_s3.threads.ledger_ops import ToolCallOperations
from awaken_s3.threads.run_ops import RunOperations
from awaken_s3.threads.sweep_ops import SweepOperations


class BaseThreadStore(RunOperations, CommitOperations, ToolCallOperations, SweepOperations):
    """Every contract of :mod:`awaken_s3.threads.base` (``ThreadStore``, ``RunSweepStore``)
    over a backend's ``_get``, ``_write``, ``_transact`` and ``_query``."""
