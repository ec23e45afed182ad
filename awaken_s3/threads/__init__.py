"""Threads in DynamoDB: messages, run state with its lease, tool-call records.

The contracts (:class:`RunStore`, :class:`ToolCallLedger`, :class:`RunSweepStore`, and
:class:`ThreadStore` = runs + ledger), an in-memory backend and a DynamoDB backend that each
implement all of them; the key design and the commit protocol are described in
docs/THREADS.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_attributes

if TYPE_CHECKING:
    from awaken_s3.threads.base import RunStore, RunSweepStore, ThreadStore, ToolCallLedger
    from awaken_s3.threads.dynamo import DynamoThreadStore, create_table, dynamodb_client_config
    from awaken_s3.threads.errors import (
        CommitConflict,
        CommitFenced,
        LeaseLost,
        LeaseUnavailable,
        MessageTooLarge,
        RunActive,
        RunChanged,
        RunExists,
        RunNotFound,
        StoreThrottled,
        StoreUnavailable,
        TableNotFound,
        ThreadExists,
        ThreadMovedOn,
        ThreadNotFound,
        ThreadStoreError,
        ToolCallConflict,
    )
    from awaken_s3.threads.memory import InMemoryThreadStore
    from awaken_s3.threads.models import (
        CommitResult,
        Lease,
        RunSettings,
        RunState,
        RunStatus,
        Thread,
        ToolCallRecord,
        ToolCallStatus,
        TurnCommit,
    )

_LAZY = {
    "CommitConflict": "awaken_s3.threads.errors",
    "CommitFenced": "awaken_s3.threads.errors",
    "CommitResult": "awaken_s3.threads.models",
    "DynamoThreadStore": "awaken_s3.threads.dynamo",
    "InMemoryThreadStore": "awaken_s3.threads.memory",
    "Lease": "awaken_s3.threads.models",
    "LeaseLost": "awaken_s3.threads.errors",
    "LeaseUnavailable": "awaken_s3.threads.errors",
    "MessageTooLarge": "awaken_s3.threads.errors",
    "RunActive": "awaken_s3.threads.errors",
    "RunChanged": "awaken_s3.threads.errors",
    "RunExists": "awaken_s3.threads.errors",
    "RunNotFound": "awaken_s3.threads.errors",
    "RunSettings": "awaken_s3.threads.models",
    "RunState": "awaken_s3.threads.models",
    "RunStatus": "awaken_s3.threads.models",
    "RunStore": "awaken_s3.threads.base",
    "RunSweepStore": "awaken_s3.threads.base",
    "StoreThrottled": "awaken_s3.threads.errors",
    "StoreUnavailable": "awaken_s3.threads.errors",
    "TableNotFound": "awaken_s3.threads.errors",
    "Thread": "awaken_s3.threads.models",
    "ThreadExists": "awaken_s3.threads.errors",
    "ThreadMovedOn": "awaken_s3.threads.errors",
    "ThreadNotFound": "awaken_s3.threads.errors",
    "ThreadStore": "awaken_s3.threads.base",
    "ThreadStoreError": "awaken_s3.threads.errors",
    "ToolCallConflict": "awaken_s3.threads.errors",
    "ToolCallLedger": "awaken_s3.threads.base",
    "ToolCallRecord": "awaken_s3.threads.models",
    "ToolCallStatus": "awaken_s3.threads.models",
    "TurnCommit": "awaken_s3.threads.models",
    "create_table": "awaken_s3.threads.dynamo",
    "dynamodb_client_config": "awaken_s3.threads.dynamo",
}

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "CommitConflict",
    "CommitFenced",
    "CommitResult",
    "DynamoThreadStore",
    "InMemoryThreadStore",
    "Lease",
    "LeaseLost",
    "LeaseUnavailable",
    "MessageTooLarge",
    "RunActive",
    "RunChanged",
    "RunExists",
    "RunNotFound",
    "RunSettings",
    "RunState",
    "RunStatus",
    "RunStore",
    "RunSweepStore",
    "StoreThrottled",
    "StoreUnavailable",
    "TableNotFound",
    "Thread",
    "ThreadExists",
    "ThreadMovedOn",
    "ThreadNotFound",
    "ThreadStore",
    "ThreadStoreError",
    "ToolCallConflict",
    "ToolCallLedger",
    "ToolCallRecord",
    "ToolCallStatus",
    "TurnCommit",
    "create_table",
    "dynamodb_client_config",
]
