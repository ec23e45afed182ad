"""Threads in DynamoDB: messages, run state with its lease, tool-call records.

The contracts (:class:`RunStore`, :class:`ToolCallLedger`, :class:`RunSweepStore`, and
:class:`ThreadStore` = runs + ledger), an in-memory backend and a DynamoDB backend that each
implement all of them; the key design and the commit protocol are described in
docs/THREADS.md.
"""

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
