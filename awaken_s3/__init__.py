"""awaken-s3: streaming LLM turns that survive the death of their process.

The S3, filesystem and synchronous stores, the provider adapters, the thread
stores and the run loop are imported on first use: loading aioboto3 costs
~0.4 s, which a caller that only plans recoveries should not pay.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from awaken_s3.errors import (
    CheckpointCorrupt,
    CheckpointFenced,
    CheckpointSchemaUnsupported,
    CheckpointTooLarge,
    StoreLocked,
    StreamCheckpointError,
)
from awaken_s3.ids import InvalidIdError
from awaken_s3.messages import (
    Message,
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from awaken_s3.models import PartialToolCall, StoredCheckpoint, StreamCheckpoint
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.outcome import (
    CheckpointStats,
    ClassifiedError,
    DroppedToolCall,
    TurnCompleted,
    TurnFailed,
    TurnOutcome,
    TurnSuspended,
    Usage,
)
from awaken_s3.streaming.provider import ModelRequest, Provider, ProviderCapabilities, ToolSpec
from awaken_s3.streaming.recovery import RecoveryPlan, plan_recovery
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import NOT_LOADED, TurnRunner
from awaken_s3.streaming.scripted import ScriptedProvider

if TYPE_CHECKING:
    from awaken_s3.providers import (
        AnthropicProvider,
        BedrockConverseProvider,
        OpenAIChatProvider,
        ProviderSettings,
        build_provider,
    )
    from awaken_s3.runtime import RunEnd, RunLoop, RunResult, Tool, ToolRegistry
    from awaken_s3.stores.fs import FsStreamCheckpointStore
    from awaken_s3.stores.s3 import S3StreamCheckpointStore
    from awaken_s3.stores.sync import SyncStreamCheckpointStore
    from awaken_s3.threads import (
        DynamoThreadStore,
        InMemoryThreadStore,
        RunSettings,
        RunState,
        RunStatus,
        Thread,
        ThreadNotFound,
        ThreadStore,
        ThreadStoreError,
        create_table,
        dynamodb_client_config,
    )

_LAZY = {
    "FsStreamCheckpointStore": "awaken_s3.stores.fs",
    "S3StreamCheckpointStore": "awaken_s3.stores.s3",
    "SyncStreamCheckpointStore": "awaken_s3.stores.sync",
    "AnthropicProvider": "awaken_s3.providers",
    "BedrockConverseProvider": "awaken_s3.providers",
    "OpenAIChatProvider": "awaken_s3.providers",
    "ProviderSettings": "awaken_s3.providers",
    "build_provider": "awaken_s3.providers",
    "ThreadStore": "awaken_s3.threads",
    "InMemoryThreadStore": "awaken_s3.threads",
    "DynamoThreadStore": "awaken_s3.threads",
    "RunSettings": "awaken_s3.threads",
    "RunState": "awaken_s3.threads",
    "RunStatus": "awaken_s3.threads",
    "Thread": "awaken_s3.threads",
    "ThreadStoreError": "awaken_s3.threads",
    "ThreadNotFound": "awaken_s3.threads",
    "create_table": "awaken_s3.threads",
    "dynamodb_client_config": "awaken_s3.threads",
    "RunLoop": "awaken_s3.runtime",
    "RunResult": "awaken_s3.runtime",
    "RunEnd": "awaken_s3.runtime",
    "Tool": "awaken_s3.runtime",
    "ToolRegistry": "awaken_s3.runtime",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'awaken_s3' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "NOT_LOADED",
    "AnthropicProvider",
    "BedrockConverseProvider",
    "CheckpointCorrupt",
    "CheckpointFenced",
    "CheckpointPolicy",
    "CheckpointSchemaUnsupported",
    "CheckpointStats",
    "CheckpointTooLarge",
    "ClassifiedError",
    "DroppedToolCall",
    "DynamoThreadStore",
    "FsStreamCheckpointStore",
    "InMemoryStreamCheckpointStore",
    "InMemoryThreadStore",
    "InvalidIdError",
    "Message",
    "ModelRequest",
    "OpenAIChatProvider",
    "PartialToolCall",
    "Provider",
    "ProviderBlock",
    "ProviderCapabilities",
    "ProviderSettings",
    "RecoveryPlan",
    "RedactedThinkingBlock",
    "RetryPolicy",
    "RunEnd",
    "RunLoop",
    "RunResult",
    "RunSettings",
    "RunState",
    "RunStatus",
    "S3StreamCheckpointStore",
    "ScriptedProvider",
    "StoreLocked",
    "StoredCheckpoint",
    "StreamAccumulator",
    "StreamCheckpoint",
    "StreamCheckpointError",
    "StreamCheckpointStore",
    "SyncStreamCheckpointStore",
    "TextBlock",
    "ThinkingBlock",
    "Thread",
    "ThreadNotFound",
    "ThreadStore",
    "ThreadStoreError",
    "Tool",
    "ToolRegistry",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "TurnCompleted",
    "TurnFailed",
    "TurnOutcome",
    "TurnRunner",
    "TurnSuspended",
    "Usage",
    "build_provider",
    "create_table",
    "dynamodb_client_config",
    "plan_recovery",
]
