"""awaken-s3: streaming LLM turns that survive the death of their process.

The names a user builds on, each written once below (docs/ARCHITECTURE.md, "The public
namespace"); everything else is reached from its submodule (``awaken_s3.runtime.loop.RunLoop``,
``awaken_s3.streaming.runner.TurnRunner``, ...). Every name is imported on first use:
loading aioboto3 costs ~0.4 s and the pydantic models ~0.2 s, which a caller that only needs
one module (a Lambda handler at import, a caller that only plans recoveries) should not pay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_exports

if TYPE_CHECKING:
    from awaken_s3.agents import Agent as Agent
    from awaken_s3.agents import App as App
    from awaken_s3.agents import load_app as load_app
    from awaken_s3.errors import AwakenError as AwakenError
    from awaken_s3.errors import CheckpointCorrupt as CheckpointCorrupt
    from awaken_s3.errors import CheckpointFenced as CheckpointFenced
    from awaken_s3.errors import CheckpointSchemaUnsupported as CheckpointSchemaUnsupported
    from awaken_s3.errors import CheckpointTooLarge as CheckpointTooLarge
    from awaken_s3.errors import StoreLocked as StoreLocked
    from awaken_s3.errors import StreamCheckpointError as StreamCheckpointError
    from awaken_s3.failures import FailureCode as FailureCode
    from awaken_s3.ids import InvalidIdError as InvalidIdError
    from awaken_s3.mcp import MCPServer as MCPServer
    from awaken_s3.messages import Message as Message
    from awaken_s3.messages import ProviderBlock as ProviderBlock
    from awaken_s3.messages import RedactedThinkingBlock as RedactedThinkingBlock
    from awaken_s3.messages import TextBlock as TextBlock
    from awaken_s3.messages import ThinkingBlock as ThinkingBlock
    from awaken_s3.messages import ToolResultBlock as ToolResultBlock
    from awaken_s3.messages import ToolUseBlock as ToolUseBlock
    from awaken_s3.models import PartialToolCall as PartialToolCall
    from awaken_s3.models import StoredCheckpoint as StoredCheckpoint
    from awaken_s3.models import StreamCheckpoint as StreamCheckpoint
    from awaken_s3.providers import AnthropicProvider as AnthropicProvider
    from awaken_s3.providers import BedrockConverseProvider as BedrockConverseProvider
    from awaken_s3.providers import OpenAIChatProvider as OpenAIChatProvider
    from awaken_s3.providers import ProviderSettings as ProviderSettings
    from awaken_s3.providers import build_provider as build_provider
    from awaken_s3.runtime.tool_context import ToolContext as ToolContext
    from awaken_s3.runtime.tools import Tool as Tool
    from awaken_s3.runtime.tools import ToolError as ToolError
    from awaken_s3.runtime.tools import tool as tool
    from awaken_s3.stores.base import StreamCheckpointStore as StreamCheckpointStore
    from awaken_s3.stores.fs import FsStreamCheckpointStore as FsStreamCheckpointStore
    from awaken_s3.stores.memory import (
        InMemoryStreamCheckpointStore as InMemoryStreamCheckpointStore,
    )
    from awaken_s3.stores.s3 import S3StreamCheckpointStore as S3StreamCheckpointStore
    from awaken_s3.stores.sync import SyncStreamCheckpointStore as SyncStreamCheckpointStore
    from awaken_s3.streaming.coalescer import CheckpointPolicy as CheckpointPolicy
    from awaken_s3.streaming.outcome import ClassifiedError as ClassifiedError
    from awaken_s3.streaming.outcome import DroppedToolCall as DroppedToolCall
    from awaken_s3.streaming.outcome import TurnCompleted as TurnCompleted
    from awaken_s3.streaming.outcome import TurnFailed as TurnFailed
    from awaken_s3.streaming.outcome import TurnFenced as TurnFenced
    from awaken_s3.streaming.outcome import TurnOutcome as TurnOutcome
    from awaken_s3.streaming.outcome import TurnSuspended as TurnSuspended
    from awaken_s3.streaming.outcome import Usage as Usage
    from awaken_s3.streaming.provider import ModelRequest as ModelRequest
    from awaken_s3.streaming.provider import Provider as Provider
    from awaken_s3.streaming.provider import ProviderCapabilities as ProviderCapabilities
    from awaken_s3.streaming.provider import ToolSpec as ToolSpec
    from awaken_s3.streaming.recovery import RecoveryPlan as RecoveryPlan
    from awaken_s3.streaming.recovery import plan_recovery as plan_recovery
    from awaken_s3.streaming.resumable import ResumableTurn as ResumableTurn
    from awaken_s3.streaming.resumable import TurnNotCompleted as TurnNotCompleted
    from awaken_s3.streaming.resumable import open_turn as open_turn
    from awaken_s3.streaming.retry import RetryPolicy as RetryPolicy
    from awaken_s3.streaming.scripted import ScriptedProvider as ScriptedProvider
    from awaken_s3.streaming.turn_events import ReasoningChunk as ReasoningChunk
    from awaken_s3.streaming.turn_events import TextChunk as TextChunk
    from awaken_s3.streaming.turn_events import ToolCallChunk as ToolCallChunk
    from awaken_s3.streaming.turn_events import ToolCallReady as ToolCallReady
    from awaken_s3.streaming.turn_events import ToolCallStarted as ToolCallStarted
    from awaken_s3.streaming.turn_events import TurnEvent as TurnEvent
    from awaken_s3.streaming.turn_events import TurnResumed as TurnResumed
    from awaken_s3.threads import DynamoThreadStore as DynamoThreadStore
    from awaken_s3.threads import InMemoryThreadStore as InMemoryThreadStore
    from awaken_s3.threads import RunSettings as RunSettings
    from awaken_s3.threads import RunState as RunState
    from awaken_s3.threads import RunStatus as RunStatus
    from awaken_s3.threads import Thread as Thread
    from awaken_s3.threads import ThreadNotFound as ThreadNotFound
    from awaken_s3.threads import ThreadStore as ThreadStore
    from awaken_s3.threads import ThreadStoreError as ThreadStoreError
    from awaken_s3.threads import create_table as create_table
    from awaken_s3.threads import dynamodb_client_config as dynamodb_client_config

__getattr__, __dir__, __all__ = lazy_exports(__name__)
