"""Storage settings from the environment."""

from __future__ import annotations

import pytest

from awaken_s3.settings import SettingsError, StorageSettings


def test_bucket_and_table_are_required_and_the_prefix_defaults() -> None:
    settings = StorageSettings.from_env({"AWAKEN_BUCKET": "b", "AWAKEN_TABLE": "t"})
    assert (settings.bucket, settings.table, settings.checkpoint_prefix) == (
        "b",
        "t",
        "checkpoints/",
    )
    assert settings.queue_url is None
    with pytest.raises(SettingsError, match="AWAKEN_TABLE"):
        StorageSettings.from_env({"AWAKEN_BUCKET": "b"})


def test_a_queue_can_be_required() -> None:
    with pytest.raises(SettingsError, match="AWAKEN_QUEUE_URL"):
        StorageSettings.from_env({"AWAKEN_BUCKET": "b", "AWAKEN_TABLE": "t"}, need_queue=True)


def test_a_prefix_must_name_a_folder() -> None:
    env = {"AWAKEN_BUCKET": "b", "AWAKEN_TABLE": "t", "AWAKEN_CHECKPOINT_PREFIX": "ckpt"}
    with pytest.raises(SettingsError, match="end with '/'"):
        StorageSettings.from_env(env)
    env["AWAKEN_CHECKPOINT_PREFIX"] = "runs/ckpt/"
    assert StorageSettings.from_env(env).checkpoint_prefix == "runs/ckpt/"
