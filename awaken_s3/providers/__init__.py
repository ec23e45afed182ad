"""Model-provider adapters: Bedrock ConverseStream, Anthropic Messages, OpenAI Chat Completions.

Each adapter implements :class:`~awaken_s3.streaming.provider.Provider`. The
Anthropic and OpenAI SDKs are imported only when such a provider is built, so
the package works without the ``anthropic``/``openai`` extras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_attributes

if TYPE_CHECKING:
    from awaken_s3.providers.anthropic import AnthropicProvider
    from awaken_s3.providers.bedrock import BedrockConverseProvider
    from awaken_s3.providers.config import (
        ConfigError,
        ProviderSettings,
        build_provider,
        load_api_key,
    )
    from awaken_s3.providers.hints import MAX_RETRY_AFTER, parse_retry_after
    from awaken_s3.providers.openai import OpenAIChatProvider
    from awaken_s3.providers.prefill import PrefillOverride, default_claude_prefill

_LAZY = {
    "AnthropicProvider": "awaken_s3.providers.anthropic",
    "BedrockConverseProvider": "awaken_s3.providers.bedrock",
    "ConfigError": "awaken_s3.providers.config",
    "MAX_RETRY_AFTER": "awaken_s3.providers.hints",
    "OpenAIChatProvider": "awaken_s3.providers.openai",
    "PrefillOverride": "awaken_s3.providers.prefill",
    "ProviderSettings": "awaken_s3.providers.config",
    "build_provider": "awaken_s3.providers.config",
    "default_claude_prefill": "awaken_s3.providers.prefill",
    "load_api_key": "awaken_s3.providers.config",
    "parse_retry_after": "awaken_s3.providers.hints",
}

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "MAX_RETRY_AFTER",
    "AnthropicProvider",
    "BedrockConverseProvider",
    "ConfigError",
    "OpenAIChatProvider",
    "PrefillOverride",
    "ProviderSettings",
    "build_provider",
    "default_claude_prefill",
    "load_api_key",
    "parse_retry_after",
]
