"""Threads in DynamoDB: messages, run state with its lease, tool-call records.

The contracts (:class:`RunStore`, :class:`ToolCallLedger`, :class:`RunSweepStore`, and
:class:`ThreadStore` = runs + ledger), and two backends, in memory and DynamoDB, that
implement all of them through one algorithm (:mod:`awaken_s3.threads.persistence`) and one
set of conditions (:mod:`awaken_s3.threads.conditions`); the key design and the commit
protocol are described in docs/THREADS.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_exports

if TYPE_CHECKING:
    from awaken_s3.threads.base import RunStore as RunStore
    from awaken_s3.threads.base import RunSweepStore as RunSweepStore
    from awaken_s3.threads.base import ThreadStore as ThreadStore
    from awaken_s3.threads.base import ToolCallLedger as ToolCallLedger
    from awaken_s3.threads.dynamo import DynamoThreadStore as DynamoThreadStore
    from awaken_s3.threads.dynamo import create_table as create_table
    from awaken_s3.threads.dynamo import dynamodb_client_config as dynamodb_client_config
    from awaken_s3.threads.errors import CommitConflict as CommitConflict
    from awaken_s3.threads.errors import CommitFenced as CommitFenced
    from awaken_s3.threads.errors import LeaseLost as LeaseLost
    from awaken_s3.threads.errors import LeaseUnavailable as LeaseUnavailable
    from awaken_s3.threads.errors import MessageTooLarge as MessageTooLarge
    from awaken_s3.threads.errors import RunActive as RunActive
    from awaken_s3.threads.errors import RunChanged as RunChanged
    from awaken_s3.threads.errors import RunExists as RunExists
    from awaken_s3.threads.errors import RunNotFound as RunNotFound
    from awaken_s3.threads.errors import StoreThrottled as StoreThrottled
    from awaken_s3.threads.errors import StoreUnavailable as StoreUnavailable
    from awaken_s3.threads.errors import TableNotFound as TableNotFound
    from awaken_s3.threads.errors import ThreadExists as ThreadExists
    from awaken_s3.threads.errors import ThreadMovedOn as ThreadMovedOn
    from awaken_s3.threads.errors import ThreadNotFound as ThreadNotFound
    from awaken_s3.threads.errors import ThreadStoreError as ThreadStoreError
    from awaken_s3.threads.errors import ToolCallConflict as ToolCallConflict
    from awaken_s3.threads.errors import ToolCallMismatch as ToolCallMismatch
    from awaken_s3.threads.memory import InMemoryThreadStore as InMemoryThreadStore
    from awaken_s3.threads.models import CommitResult as CommitResult
    from awaken_s3.threads.models import Lease as Lease
    from awaken_s3.threads.models import RunSettings as RunSettings
    from awaken_s3.threads.models import RunState as RunState
    from awaken_s3.threads.models import RunStatus as RunStatus
    from awaken_s3.threads.models import Thread as Thread
    from awaken_s3.threads.models import ToolCallRecord as ToolCallRecord
    from awaken_s3.threads.models import ToolCallStatus as ToolCallStatus
    from awaken_s3.threads.models import TurnCommit as TurnCommit
    from awaken_s3.threads.persistence import BaseThreadStore as BaseThreadStore

__getattr__, __dir__, __all__ = lazy_exports(__name__)
