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


def test_the_sweep_grace_follows_the_lease_and_the_visibility_margin() -> None:
    # A dead worker's record comes back a margin after its lease ran out; the sweeper waits a
    # third of a lease more before it re-sends the run, and no longer than that (what the
    # queue lost must be re-sent within three leases of the crash).
    base = {"AWAKEN_BUCKET": "b", "AWAKEN_TABLE": "t"}
    assert StorageSettings.from_env(base).sweep_grace == 30.0  # 10 s margin + 60 s / 3
    env = {**base, "AWAKEN_LEASE_SECONDS": "30", "AWAKEN_VISIBILITY_MARGIN_SECONDS": "5"}
    assert StorageSettings.from_env(env).sweep_grace == 15.0
    # An explicit grace wins (every function must be given the same one).
    assert StorageSettings.from_env({**env, "AWAKEN_SWEEP_GRACE_SECONDS": "45"}).sweep_grace == 45
    for name in ("AWAKEN_SWEEP_GRACE_SECONDS", "AWAKEN_LEASE_SECONDS"):
        for bad in ("soon", "0", "-3", "nan"):
            with pytest.raises(SettingsError, match=name):
                StorageSettings.from_env({**base, name: bad})
