"""awaken-s3: streaming LLM turns that survive the death of their process.

The S3, filesystem and synchronous stores and the provider adapters are
imported on first use: loading
aioboto3 costs ~0.4 s, which a caller that only plans recoveries (or a Lambda
cold start that never touches S3) should not pay.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from awaken_s3.errors import (
    CheckpointCorrupt,
    CheckpointFenced,
    CheckpointTooLarge,
    StoreLocked,
    StreamCheckpointError,
)
from awaken_s3.ids import InvalidIdError
from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
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
    from awaken_s3.stores.fs import FsStreamCheckpointStore
    from awaken_s3.stores.s3 import S3StreamCheckpointStore
    from awaken_s3.stores.sync import SyncStreamCheckpointStore

_LAZY = {
    "FsStreamCheckpointStore": "awaken_s3.stores.fs",
    "S3StreamCheckpointStore": "awaken_s3.stores.s3",
    "SyncStreamCheckpointStore": "awaken_s3.stores.sync",
    "AnthropicProvider": "awaken_s3.providers",
    "BedrockConverseProvider": "awaken_s3.providers",
    "OpenAIChatProvider": "awaken_s3.providers",
    "ProviderSettings": "awaken_s3.providers",
    "build_provider": "awaken_s3.providers",
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
    "CheckpointStats",
    "CheckpointTooLarge",
    "ClassifiedError",
    "DroppedToolCall",
    "FsStreamCheckpointStore",
    "InMemoryStreamCheckpointStore",
    "InvalidIdError",
    "Message",
    "ModelRequest",
    "OpenAIChatProvider",
    "PartialToolCall",
    "Provider",
    "ProviderCapabilities",
    "ProviderSettings",
    "RecoveryPlan",
    "RetryPolicy",
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
    "plan_recovery",
]
