"""One error tree: every exception class of the package derives from AwakenError, and each
keeps the documented base its callers catch."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import awaken_s3
from awaken_s3.errors import AwakenError, StreamCheckpointError
from awaken_s3.failures import FailureCode
from awaken_s3.service.public_errors import PUBLIC_MESSAGES
from awaken_s3.streaming import errors as provider_errors
from awaken_s3.threads.errors import ThreadStoreError


def _package_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in pkgutil.walk_packages(awaken_s3.__path__, "awaken_s3."):
        if module.name.endswith("__main__"):
            continue
        loaded = importlib.import_module(module.name)
        for _, value in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("awaken_s3."):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_exception_of_the_package_is_an_awaken_error() -> None:
    exceptions = _package_exceptions()
    assert len(exceptions) > 40  # the walk found the package's modules
    outside = sorted(e.__qualname__ for e in exceptions if not issubclass(e, AwakenError))
    assert outside == []


@pytest.mark.parametrize(
    ("name", "documented_base"),
    [
        ("awaken_s3.errors.CheckpointFenced", StreamCheckpointError),
        ("awaken_s3.errors.CheckpointTooLarge", ValueError),
        ("awaken_s3.threads.errors.CommitFenced", ThreadStoreError),
        ("awaken_s3.threads.errors.MessageTooLarge", ValueError),
        ("awaken_s3.streaming.errors.Throttled", provider_errors.RetryableProviderError),
        ("awaken_s3.settings.SettingsError", ValueError),
        ("awaken_s3.providers.config.ConfigError", ValueError),
        ("awaken_s3.ids.InvalidIdError", ValueError),
        ("awaken_s3.agents.UnknownAgent", LookupError),
        ("awaken_s3.runtime.tool_schema.ToolDefinitionError", TypeError),
        ("awaken_s3.streaming.resumable.TurnNotCompleted", RuntimeError),
    ],
)
def test_each_class_keeps_its_documented_base(
    name: str, documented_base: type[BaseException]
) -> None:
    module, _, attribute = name.rpartition(".")
    cls = getattr(importlib.import_module(module), attribute)
    assert issubclass(cls, documented_base) and issubclass(cls, AwakenError)


def test_every_provider_error_code_is_a_failure_code_with_a_public_text() -> None:
    pending: list[type[provider_errors.ProviderError]] = [provider_errors.ProviderError]
    while pending:
        cls = pending.pop()
        assert isinstance(cls.code, FailureCode), cls
        pending.extend(cls.__subclasses__())
    assert {code.value: code.public_message for code in FailureCode} == dict(PUBLIC_MESSAGES)
