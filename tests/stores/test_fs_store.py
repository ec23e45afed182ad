"""Filesystem store: single owner, durable replace, content-independent versions."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from awaken_s3.errors import CheckpointCorrupt, CheckpointFenced, StoreLocked, StreamCheckpointError
from awaken_s3.stores.fs import FsStreamCheckpointStore
from tests.stores.conftest import make_checkpoint

HOLDER = textwrap.dedent(
    """
    import sys
    from awaken_s3.stores.fs import FsStreamCheckpointStore
    store = FsStreamCheckpointStore(sys.argv[1])
    print("locked", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.slow
def test_a_second_process_cannot_open_an_owned_directory(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLocked) as caught:
            FsStreamCheckpointStore(tmp_path)
        message = str(caught.value)
        assert str(tmp_path) in message
        assert f"pid {holder.pid}" in message
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=10)
    # Once the owner is gone the directory can be opened.
    FsStreamCheckpointStore(tmp_path).close()


def test_a_second_opener_in_the_same_process_is_refused_until_close(tmp_path: Path) -> None:
    first = FsStreamCheckpointStore(tmp_path)
    with pytest.raises(StoreLocked, match="owned by another"):
        FsStreamCheckpointStore(tmp_path)
    first.close()
    first.close()  # idempotent
    with FsStreamCheckpointStore(tmp_path):
        pass


@pytest.mark.slow
def test_lock_is_released_when_the_owner_process_dies(tmp_path: Path) -> None:
    # flock dies with its process, so a crashed owner never wedges the directory.
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys\n"
            "from awaken_s3.stores.fs import FsStreamCheckpointStore\n"
            "FsStreamCheckpointStore(sys.argv[1])\n"
            "os._exit(0)\n",
            str(tmp_path),
        ],
        check=True,
        timeout=60,
    )
    FsStreamCheckpointStore(tmp_path).close()


async def test_checkpoints_and_versions_survive_a_restart(tmp_path: Path) -> None:
    async with FsStreamCheckpointStore(tmp_path) as store:
        v1 = await store.put(make_checkpoint(partial_text="a"), expected_version=None)
        v2 = await store.put(make_checkpoint(partial_text="ab"), expected_version=v1)
    async with FsStreamCheckpointStore(tmp_path) as reopened:
        stored = await reopened.get("run-1")
        assert stored is not None
        assert (stored.checkpoint.partial_text, stored.version) == ("ab", v2)
        with pytest.raises(CheckpointFenced):
            await reopened.put(make_checkpoint(partial_text="stale"), expected_version=v1)
        await reopened.put(make_checkpoint(partial_text="abc"), expected_version=v2)


async def test_versions_do_not_depend_on_content(tmp_path: Path) -> None:
    # Unlike an ETag, rewriting identical bytes still moves the version, so a
    # writer holding the old version is fenced.
    checkpoint = make_checkpoint()
    async with FsStreamCheckpointStore(tmp_path) as store:
        v1 = await store.put(checkpoint, expected_version=None)
        v2 = await store.put(checkpoint, expected_version=v1)
        assert v1 != v2
        with pytest.raises(CheckpointFenced):
            await store.put(checkpoint, expected_version=v1)


async def test_only_the_checkpoint_file_and_lock_are_left_on_disk(tmp_path: Path) -> None:
    async with FsStreamCheckpointStore(tmp_path) as store:
        version = await store.put(make_checkpoint(), expected_version=None)
        await store.put(make_checkpoint(partial_text="more"), expected_version=version)
        assert listing(tmp_path) == [".lock", "run-1.ckpt"]
        await store.delete("run-1")
        assert listing(tmp_path) == [".lock"]


async def test_temp_files_of_a_crashed_owner_are_ignored_and_removed(tmp_path: Path) -> None:
    async with FsStreamCheckpointStore(tmp_path) as store:
        version = await store.put(make_checkpoint(partial_text="durable"), expected_version=None)
    # What a crash between write and rename leaves behind.
    (tmp_path / ".tmp-run-1-deadbeef").write_bytes(b"half a checkp")
    async with FsStreamCheckpointStore(tmp_path) as store:
        stored = await store.get("run-1")
        assert stored is not None
        assert (stored.checkpoint.partial_text, stored.version) == ("durable", version)
        assert not [name for name in listing(tmp_path) if name.startswith(".tmp-")]


@pytest.mark.parametrize(
    "content", [b"", b"no header here", b"awaken-fs-checkpoint/1 not-a-version\n{}"]
)
async def test_a_file_without_a_valid_header_is_corrupt(tmp_path: Path, content: bytes) -> None:
    async with FsStreamCheckpointStore(tmp_path) as store:
        store.path_for("run-1").write_bytes(content)
        with pytest.raises(CheckpointCorrupt):
            await store.get("run-1")
        with pytest.raises(CheckpointFenced):
            await store.put(make_checkpoint(), expected_version="0" * 32)
        await store.delete("run-1")
        assert await store.get("run-1") is None


async def test_io_failures_surface_as_store_errors_with_the_cause(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    async with FsStreamCheckpointStore(directory) as store:
        shutil.rmtree(directory)
        with pytest.raises(StreamCheckpointError) as caught:
            await store.put(make_checkpoint(), expected_version=None)
        assert type(caught.value) is StreamCheckpointError
        assert isinstance(caught.value.__cause__, OSError)


def test_an_unusable_directory_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StreamCheckpointError, match="cannot open"):
        FsStreamCheckpointStore(blocker / "ckpt")


async def test_a_closed_store_refuses_operations(tmp_path: Path) -> None:
    store = FsStreamCheckpointStore(tmp_path)
    await store.aclose()
    with pytest.raises(StreamCheckpointError, match="closed"):
        await store.get("run-1")
    with pytest.raises(StreamCheckpointError, match="closed"):
        await store.put(make_checkpoint(), expected_version=None)
