"""Provider selection, model id and API keys from configuration.

Environment (set by the SAM template's parameters):

- ``AWAKEN_PROVIDER``: ``bedrock`` (default) | ``anthropic`` | ``openai``
- ``AWAKEN_MODEL``: the model id (Bedrock model or inference-profile id, Anthropic
  or OpenAI model name)
- ``AWAKEN_OPENAI_BASE_URL`` / ``AWAKEN_ANTHROPIC_BASE_URL``: another endpoint
  (vLLM, Ollama, a proxy)
- ``AWAKEN_API_KEY_PARAM``: name of an SSM parameter (SecureString) holding the key, or
- ``AWAKEN_API_KEY_SECRET``: name/ARN of a Secrets Manager secret holding the key
  (plain string, or a JSON object whose ``AWAKEN_API_KEY_SECRET_FIELD`` holds it)
- ``AWAKEN_API_KEY_MAX_AGE``: seconds Powertools caches the key (default 300)
- ``AWAKEN_PROVIDER_IDLE_TIMEOUT``: idle-stall timeout in seconds (default 60)
- ``AWAKEN_PREFILL``: ``true``/``false`` to override the per-model prefill default
- ``AWAKEN_PROVIDER_EXTRA``: a JSON object of fields sent with every request (extended
  thinking: ``{"thinking": {"type": "adaptive"}}`` for Anthropic,
  ``{"additionalModelRequestFields": {"thinking": {...}}}`` for Bedrock)

Keys are fetched through Powertools' parameters utility (decrypted, cached for
``max_age``), held as :class:`pydantic.SecretStr`, handed only to the SDK
client, and never logged or written to a checkpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BeforeValidator, SecretStr, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import NoDecode

from awaken_s3.errors import AwakenError
from awaken_s3.settings import Count, EnvSettings, Seconds, SettingsError, env
from awaken_s3.streaming.provider import Provider

logger = logging.getLogger(__name__)

ProviderName = Literal["bedrock", "anthropic", "openai"]
DEFAULT_MODELS: dict[str, str] = {
    "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-4.1",
}

# botocore logs whole response bodies at DEBUG from these loggers: with an SSM
# or Secrets Manager response, that body is the key.
_WIRE_LOGGERS = ("botocore.parsers", "botocore.endpoint", "botocore.hooks")


class ConfigError(SettingsError):
    """The provider configuration is missing or inconsistent (a :class:`SettingsError`, and
    so a ``ValueError``)."""


def _provider(raw: Any) -> str:
    name = str(raw).strip().lower()
    if name not in DEFAULT_MODELS:
        raise PydanticCustomError(
            "setting", "must be bedrock, anthropic or openai, not {got}", {"got": repr(name)}
        )
    return name


def _prefill(raw: Any) -> bool | None:
    if raw is None or isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("", "true", "false", "1", "0", "yes", "no"):
        raise PydanticCustomError(
            "setting", "must be true or false, not {got}", {"got": repr(text)}
        )
    return None if not text else text in ("true", "1", "yes")


def _extra(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise PydanticCustomError("setting", "is not JSON: {why}", {"why": str(exc)}) from None
    if not isinstance(raw, dict):
        raise PydanticCustomError("setting", "must be a JSON object", {})
    return raw


class ProviderSettings(EnvSettings):
    """Which provider and model to use, and where its key lives (never the key itself)."""

    error: ClassVar[type[AwakenError]] = ConfigError

    provider: Annotated[ProviderName, BeforeValidator(_provider)] = env(
        "AWAKEN_PROVIDER", "bedrock"
    )
    #: default: the provider's (:data:`DEFAULT_MODELS`)
    model: str = env("AWAKEN_MODEL", "")
    openai_base_url: str | None = env("AWAKEN_OPENAI_BASE_URL", None)
    anthropic_base_url: str | None = env("AWAKEN_ANTHROPIC_BASE_URL", None)
    api_key_param: str | None = env("AWAKEN_API_KEY_PARAM", None)
    api_key_secret: str | None = env("AWAKEN_API_KEY_SECRET", None)
    api_key_secret_field: str | None = env("AWAKEN_API_KEY_SECRET_FIELD", None)
    api_key_max_age: Count = env("AWAKEN_API_KEY_MAX_AGE", 300)
    idle_timeout: Seconds = env("AWAKEN_PROVIDER_IDLE_TIMEOUT", 60.0)
    prefill: Annotated[bool | None, BeforeValidator(_prefill)] = env("AWAKEN_PREFILL", None)
    region: str | None = env("AWS_REGION", None, alias_choices=("AWS_DEFAULT_REGION",))
    #: fields sent with every request (the adapter's ``extra``)
    extra: Annotated[dict[str, Any], NoDecode, BeforeValidator(_extra)] = env(
        "AWAKEN_PROVIDER_EXTRA", default_factory=dict
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.api_key_param and self.api_key_secret:
            raise PydanticCustomError(
                "setting", "set AWAKEN_API_KEY_PARAM or AWAKEN_API_KEY_SECRET, not both", {}
            )
        if not self.model:
            # Frozen: the default model is the provider's, filled in once here.
            object.__setattr__(self, "model", DEFAULT_MODELS[self.provider])
        return self


@contextmanager
def _quiet_wire_logs() -> Iterator[None]:
    saved = [(logging.getLogger(n), logging.getLogger(n).level) for n in _WIRE_LOGGERS]
    for wire_logger, _ in saved:
        wire_logger.setLevel(max(logging.INFO, wire_logger.getEffectiveLevel()))
    try:
        yield
    finally:
        for wire_logger, level in saved:
            wire_logger.setLevel(level)


def _key_from_secret(value: Any, field: str | None, name: str) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if field is not None:
        document = json.loads(value) if isinstance(value, str) else value
        if not isinstance(document, dict) or not isinstance(document.get(field), str):
            raise ConfigError(f"secret {name} has no string field {field!r}")
        return str(document[field])
    if not isinstance(value, str):
        raise ConfigError(f"secret {name} is not a string")
    return value


def load_api_key(settings: ProviderSettings, *, force_fetch: bool = False) -> SecretStr | None:
    """The API key from SSM or Secrets Manager, cached by Powertools for ``api_key_max_age``.

    ``force_fetch`` bypasses the cache (after a rotation, on an authentication failure).

    ``None`` when no parameter or secret is configured (the SDK then falls back
    to its own environment variable, e.g. ``ANTHROPIC_API_KEY``).
    """
    from aws_lambda_powertools.utilities import parameters

    with _quiet_wire_logs():
        if settings.api_key_param:
            value = parameters.get_parameter(
                settings.api_key_param,
                decrypt=True,
                max_age=settings.api_key_max_age,
                force_fetch=force_fetch,
            )
            source = f"SSM parameter {settings.api_key_param}"
            key = _key_from_secret(value, None, settings.api_key_param)
        elif settings.api_key_secret:
            value = parameters.get_secret(
                settings.api_key_secret, max_age=settings.api_key_max_age, force_fetch=force_fetch
            )
            source = f"secret {settings.api_key_secret}"
            key = _key_from_secret(value, settings.api_key_secret_field, settings.api_key_secret)
        else:
            return None
    # The source is logged, the key never is.
    logger.debug("loaded the %s API key from %s", settings.provider, source)
    return SecretStr(key.strip())


def build_provider(
    settings: ProviderSettings | None = None,
    *,
    api_key: SecretStr | None = None,
    session: Any | None = None,
    bedrock_client: Any | None = None,
) -> Provider:
    """The configured provider (``settings`` default: :meth:`ProviderSettings.from_env`).

    ``bedrock_client``: an open ``bedrock-runtime`` client the Bedrock provider streams on
    (configured like :func:`awaken_s3.providers.bedrock.client_config`; the caller closes it);
    without it the provider opens one per stream from ``session``.
    """
    settings = settings or ProviderSettings.from_env()
    if settings.provider == "bedrock":
        from awaken_s3.providers.bedrock import BedrockConverseProvider

        return BedrockConverseProvider(
            client=bedrock_client,
            session=None if bedrock_client is not None else session,
            region_name=settings.region,
            idle_timeout=settings.idle_timeout,
            prefill=settings.prefill,
            extra=settings.extra,
        )
    key = api_key if api_key is not None else load_api_key(settings)
    if settings.provider == "anthropic":
        from awaken_s3.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            api_key=key,
            base_url=settings.anthropic_base_url,
            idle_timeout=settings.idle_timeout,
            prefill=settings.prefill,
            extra=settings.extra,
        )
    from awaken_s3.providers.openai import OpenAIChatProvider

    return OpenAIChatProvider(
        api_key=key,
        base_url=settings.openai_base_url,
        idle_timeout=settings.idle_timeout,
        prefill=settings.prefill,
        extra=settings.extra,
    )
