"""Provider selection from the environment; API keys from SSM / Secrets Manager (moto)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws
from pydantic import SecretStr

from awaken_s3.providers.anthropic import AnthropicProvider
from awaken_s3.providers.bedrock import BedrockConverseProvider
from awaken_s3.providers.config import (
    ConfigError,
    ProviderSettings,
    build_provider,
    load_api_key,
)
from awaken_s3.providers.openai import OpenAIChatProvider

KEY = "sk-ant-api03-SUPERSECRET-0123456789"


@pytest.fixture
def aws() -> Iterator[None]:
    parameters.clear_caches()
    with mock_aws():
        yield
    parameters.clear_caches()


def test_default_is_bedrock_with_a_default_model() -> None:
    settings = ProviderSettings.from_env({"AWS_REGION": "eu-west-1"})
    assert settings.provider == "bedrock"
    assert settings.model.startswith("us.anthropic.claude")
    provider = build_provider(settings)
    assert isinstance(provider, BedrockConverseProvider)
    assert provider.name == "bedrock"


def test_openai_compatible_selection_from_env() -> None:
    settings = ProviderSettings.from_env(
        {
            "AWAKEN_PROVIDER": "OpenAI",
            "AWAKEN_MODEL": "qwen2.5:7b",
            "AWAKEN_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1",
            "AWAKEN_PROVIDER_IDLE_TIMEOUT": "30",
            "AWAKEN_PREFILL": "true",
        }
    )
    assert (settings.provider, settings.model, settings.idle_timeout) == (
        "openai",
        "qwen2.5:7b",
        30,
    )
    provider = build_provider(settings)
    assert isinstance(provider, OpenAIChatProvider)
    assert "127.0.0.1:11434" in repr(provider)
    # The explicit override wins over "Chat Completions has no prefill".
    assert provider.capabilities("qwen2.5:7b").assistant_prefill is True


def test_provider_extra_turns_thinking_on_for_every_run() -> None:
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    settings = ProviderSettings.from_env(
        {
            "AWS_REGION": "us-east-1",
            "AWAKEN_PROVIDER_EXTRA": json.dumps({"additionalModelRequestFields": thinking}),
        }
    )
    provider = build_provider(settings)
    assert isinstance(provider, BedrockConverseProvider)
    # Prefill is refused with thinking on, so the default follows it.
    assert provider.capabilities("us.anthropic.claude-sonnet-4-5-v1:0").assistant_prefill is False
    assert (
        build_provider(ProviderSettings.from_env({"AWS_REGION": "us-east-1"}))
        .capabilities("us.anthropic.claude-sonnet-4-5-v1:0")
        .assistant_prefill
    )


@pytest.mark.parametrize(
    "env",
    [
        {"AWAKEN_PROVIDER": "vertex"},
        {"AWAKEN_PREFILL": "maybe"},
        {"AWAKEN_PROVIDER_EXTRA": "{not json"},
        {"AWAKEN_PROVIDER_EXTRA": "[1]"},
        {
            "AWAKEN_PROVIDER": "anthropic",
            "AWAKEN_API_KEY_PARAM": "/a",
            "AWAKEN_API_KEY_SECRET": "b",
        },
    ],
)
def test_bad_configuration_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        ProviderSettings.from_env(env)


def test_key_from_ssm_is_decrypted_and_cached(aws: None) -> None:
    ssm = boto3.client("ssm", region_name="us-east-1")
    ssm.put_parameter(Name="/awaken/anthropic-key", Value=KEY, Type="SecureString")
    settings = ProviderSettings.from_env(
        {"AWAKEN_PROVIDER": "anthropic", "AWAKEN_API_KEY_PARAM": "/awaken/anthropic-key"}
    )
    first = load_api_key(settings)
    assert isinstance(first, SecretStr)
    assert first.get_secret_value() == KEY
    # Rotated in SSM: within max_age the cached key is still served.
    ssm.put_parameter(
        Name="/awaken/anthropic-key", Value="rotated", Type="SecureString", Overwrite=True
    )
    second = load_api_key(settings)
    assert second is not None and second.get_secret_value() == KEY
    # A forced fetch (after a rotation) reads the new value.
    fresh = load_api_key(settings, force_fetch=True)
    assert fresh is not None and fresh.get_secret_value() == "rotated"


def test_key_from_secrets_manager_plain_and_json_field(aws: None) -> None:
    sm = boto3.client("secretsmanager", region_name="us-east-1")
    sm.create_secret(Name="awaken/openai", SecretString=KEY)
    sm.create_secret(Name="awaken/bundle", SecretString=json.dumps({"api_key": KEY, "x": 1}))
    plain = load_api_key(
        ProviderSettings(provider="openai", model="m", api_key_secret="awaken/openai")
    )
    field = load_api_key(
        ProviderSettings(
            provider="openai",
            model="m",
            api_key_secret="awaken/bundle",
            api_key_secret_field="api_key",
        )
    )
    assert plain is not None and plain.get_secret_value() == KEY
    assert field is not None and field.get_secret_value() == KEY
    with pytest.raises(ConfigError):
        load_api_key(
            ProviderSettings(
                provider="openai",
                model="m",
                api_key_secret="awaken/bundle",
                api_key_secret_field="missing",
            )
        )


def test_no_key_configured_is_none() -> None:
    assert load_api_key(ProviderSettings(provider="anthropic", model="m")) is None


def test_the_key_never_reaches_logs_or_reprs(aws: None, caplog: pytest.LogCaptureFixture) -> None:
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name="/awaken/key", Value=KEY, Type="SecureString"
    )
    settings = ProviderSettings.from_env(
        {
            "AWAKEN_PROVIDER": "anthropic",
            "AWAKEN_API_KEY_PARAM": "/awaken/key",
            "AWAKEN_ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        }
    )
    caplog.set_level(logging.DEBUG)  # everything, botocore's wire logs included
    key = load_api_key(settings)
    provider = build_provider(settings, api_key=key)
    assert isinstance(provider, AnthropicProvider)
    logging.getLogger("test").info("built %s with %s from %s", provider, key, settings)
    assert key is not None and key.get_secret_value() == KEY
    assert "/awaken/key" in caplog.text  # the source is logged ...
    assert KEY not in caplog.text  # ... the key is not
    for text in (
        repr(key),
        str(key),
        repr(provider),
        str(provider),
        repr(settings),
        settings.model_dump_json(),
    ):
        assert KEY not in text
