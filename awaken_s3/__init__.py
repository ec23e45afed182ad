"""awaken-s3: streaming LLM turns that survive the death of their process.

Every name is imported on first use: loading aioboto3 costs ~0.4 s and the pydantic
models ~0.2 s, which a caller that only needs one module (a Lambda handler at import, a
caller that only plans recoveries) should not pay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_attributes

if TYPE_CHECKING:
    from awaken_s3.agents import Agent, App, load_app
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
    from awaken_s3.providers import (
        AnthropicProvider,
        BedrockConverseProvider,
        OpenAIChatProvider,
        ProviderSettings,
        build_provider,
    )
    from awaken_s3.runtime import RunEnd, RunLoop, RunResult, Tool, ToolRegistry
    from awaken_s3.runtime.tool_context import ToolContext
    from awaken_s3.runtime.tools import ToolError, tool
    from awaken_s3.stores.base import StreamCheckpointStore
    from awaken_s3.stores.fs import FsStreamCheckpointStore
    from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
    from awaken_s3.stores.s3 import S3StreamCheckpointStore
    from awaken_s3.stores.sync import SyncStreamCheckpointStore
    from awaken_s3.streaming.accumulator import StreamAccumulator
    from awaken_s3.streaming.coalescer import CheckpointPolicy
    from awaken_s3.streaming.outcome import (
        CheckpointStats,
        ClassifiedError,
        DroppedToolCall,
        TurnCompleted,
        TurnFailed,
        TurnFenced,
        TurnOutcome,
        TurnSuspended,
        Usage,
    )
    from awaken_s3.streaming.provider import ModelRequest, Provider, ProviderCapabilities, ToolSpec
    from awaken_s3.streaming.recovery import RecoveryPlan, plan_recovery
    from awaken_s3.streaming.resumable import ResumableTurn, TurnNotCompleted, open_turn
    from awaken_s3.streaming.retry import RetryPolicy
    from awaken_s3.streaming.runner import NOT_LOADED, TurnRunner
    from awaken_s3.streaming.scripted import ScriptedProvider
    from awaken_s3.streaming.turn_events import (
        ReasoningChunk,
        TextChunk,
        ToolCallChunk,
        ToolCallReady,
        ToolCallStarted,
        TurnEvent,
        TurnResumed,
    )
    from awaken_s3.streaming.turn_request import TurnRequest
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
    "Agent": "awaken_s3.agents",
    "App": "awaken_s3.agents",
    "AnthropicProvider": "awaken_s3.providers",
    "BedrockConverseProvider": "awaken_s3.providers",
    "CheckpointCorrupt": "awaken_s3.errors",
    "CheckpointFenced": "awaken_s3.errors",
    "CheckpointPolicy": "awaken_s3.streaming.coalescer",
    "CheckpointSchemaUnsupported": "awaken_s3.errors",
    "CheckpointStats": "awaken_s3.streaming.outcome",
    "CheckpointTooLarge": "awaken_s3.errors",
    "ClassifiedError": "awaken_s3.streaming.outcome",
    "DroppedToolCall": "awaken_s3.streaming.outcome",
    "DynamoThreadStore": "awaken_s3.threads",
    "FsStreamCheckpointStore": "awaken_s3.stores.fs",
    "InMemoryStreamCheckpointStore": "awaken_s3.stores.memory",
    "InMemoryThreadStore": "awaken_s3.threads",
    "InvalidIdError": "awaken_s3.ids",
    "Message": "awaken_s3.messages",
    "ModelRequest": "awaken_s3.streaming.provider",
    "NOT_LOADED": "awaken_s3.streaming.runner",
    "OpenAIChatProvider": "awaken_s3.providers",
    "PartialToolCall": "awaken_s3.models",
    "Provider": "awaken_s3.streaming.provider",
    "ProviderBlock": "awaken_s3.messages",
    "ProviderCapabilities": "awaken_s3.streaming.provider",
    "ProviderSettings": "awaken_s3.providers",
    "ReasoningChunk": "awaken_s3.streaming.turn_events",
    "RecoveryPlan": "awaken_s3.streaming.recovery",
    "RedactedThinkingBlock": "awaken_s3.messages",
    "ResumableTurn": "awaken_s3.streaming.resumable",
    "RetryPolicy": "awaken_s3.streaming.retry",
    "RunEnd": "awaken_s3.runtime",
    "RunLoop": "awaken_s3.runtime",
    "RunResult": "awaken_s3.runtime",
    "RunSettings": "awaken_s3.threads",
    "RunState": "awaken_s3.threads",
    "RunStatus": "awaken_s3.threads",
    "S3StreamCheckpointStore": "awaken_s3.stores.s3",
    "ScriptedProvider": "awaken_s3.streaming.scripted",
    "StoreLocked": "awaken_s3.errors",
    "StoredCheckpoint": "awaken_s3.models",
    "StreamAccumulator": "awaken_s3.streaming.accumulator",
    "StreamCheckpoint": "awaken_s3.models",
    "StreamCheckpointError": "awaken_s3.errors",
    "StreamCheckpointStore": "awaken_s3.stores.base",
    "SyncStreamCheckpointStore": "awaken_s3.stores.sync",
    "TextBlock": "awaken_s3.messages",
    "TextChunk": "awaken_s3.streaming.turn_events",
    "ThinkingBlock": "awaken_s3.messages",
    "Thread": "awaken_s3.threads",
    "ThreadNotFound": "awaken_s3.threads",
    "ThreadStore": "awaken_s3.threads",
    "ThreadStoreError": "awaken_s3.threads",
    "Tool": "awaken_s3.runtime",
    "ToolContext": "awaken_s3.runtime.tool_context",
    "ToolError": "awaken_s3.runtime.tools",
    "ToolCallChunk": "awaken_s3.streaming.turn_events",
    "ToolCallReady": "awaken_s3.streaming.turn_events",
    "ToolCallStarted": "awaken_s3.streaming.turn_events",
    "ToolRegistry": "awaken_s3.runtime",
    "ToolResultBlock": "awaken_s3.messages",
    "ToolSpec": "awaken_s3.streaming.provider",
    "ToolUseBlock": "awaken_s3.messages",
    "TurnCompleted": "awaken_s3.streaming.outcome",
    "TurnEvent": "awaken_s3.streaming.turn_events",
    "TurnFailed": "awaken_s3.streaming.outcome",
    "TurnFenced": "awaken_s3.streaming.outcome",
    "TurnNotCompleted": "awaken_s3.streaming.resumable",
    "TurnOutcome": "awaken_s3.streaming.outcome",
    "TurnRequest": "awaken_s3.streaming.turn_request",
    "TurnResumed": "awaken_s3.streaming.turn_events",
    "TurnRunner": "awaken_s3.streaming.runner",
    "TurnSuspended": "awaken_s3.streaming.outcome",
    "Usage": "awaken_s3.streaming.outcome",
    "build_provider": "awaken_s3.providers",
    "create_table": "awaken_s3.threads",
    "dynamodb_client_config": "awaken_s3.threads",
    "load_app": "awaken_s3.agents",
    "open_turn": "awaken_s3.streaming.resumable",
    "plan_recovery": "awaken_s3.streaming.recovery",
    "tool": "awaken_s3.runtime.tools",
}

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "NOT_LOADED",
    "Agent",
    "AnthropicProvider",
    "App",
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
    "ReasoningChunk",
    "RecoveryPlan",
    "RedactedThinkingBlock",
    "ResumableTurn",
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
    "TextChunk",
    "ThinkingBlock",
    "Thread",
    "ThreadNotFound",
    "ThreadStore",
    "ThreadStoreError",
    "Tool",
    "ToolCallChunk",
    "ToolCallReady",
    "ToolCallStarted",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "TurnCompleted",
    "TurnEvent",
    "TurnFailed",
    "TurnFenced",
    "TurnNotCompleted",
    "TurnOutcome",
    "TurnRequest",
    "TurnResumed",
    "TurnRunner",
    "TurnSuspended",
    "Usage",
    "build_provider",
    "create_table",
    "dynamodb_client_config",
    "load_app",
    "open_turn",
    "plan_recovery",
    "tool",
]
