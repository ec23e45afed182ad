"""Model-provider adapters: Bedrock ConverseStream, Anthropic Messages, OpenAI Chat Completions.

Each adapter implements :class:`~awaken_s3.streaming.provider.Provider`. The
Anthropic and OpenAI SDKs are imported only when such a provider is built, so
the package works without the ``anthropic``/``openai`` extras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_exports

if TYPE_CHECKING:
    from awaken_s3.providers.anthropic import AnthropicProvider as AnthropicProvider
    from awaken_s3.providers.bedrock import BedrockConverseProvider as BedrockConverseProvider
    from awaken_s3.providers.config import ConfigError as ConfigError
    from awaken_s3.providers.config import ProviderSettings as ProviderSettings
    from awaken_s3.providers.config import build_provider as build_provider
    from awaken_s3.providers.config import load_api_key as load_api_key
    from awaken_s3.providers.hints import MAX_RETRY_AFTER as MAX_RETRY_AFTER
    from awaken_s3.providers.hints import parse_retry_after as parse_retry_after
    from awaken_s3.providers.openai import OpenAIChatProvider as OpenAIChatProvider
    from awaken_s3.providers.prefill import PrefillOverride as PrefillOverride
    from awaken_s3.providers.prefill import default_claude_prefill as default_claude_prefill

__getattr__, __dir__, __all__ = lazy_exports(__name__)
