"""Stream checkpoints in a local directory owned by one process.

Each checkpoint is one file ``<run_id>.ckpt``: a header line carrying the
version token, then the encoded checkpoint. The directory is flat, unlike the S3 store's
hashed prefixes: a local disk has no per-prefix request limits to spread over, and the
directory belongs to one process, whose write rate no layout changes. Writes go to a
temp file that is fsynced, renamed over the old file with ``os.replace`` and made durable
by an fsync of the directory, so a crash leaves either the old or the new object.

Versions are random tokens, not content hashes and not counters: a counter
restarting after a crash could hand out a version a stale writer still holds.

A file whose header is unreadable has the version ``""``: :class:`CheckpointCorrupt` carries
it, and a delete conditional on ``""`` removes the file only while it is still unreadable.

The directory belongs to one process at a time (an exclusive ``flock`` on
``.lock``); a second opener gets :class:`StoreLocked` instead of silently
sharing files whose compare-and-swap only holds inside one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Final, TypeVar

from awaken_s3.errors import (
    CheckpointCorrupt,
    CheckpointFenced,
    StoreLocked,
    StreamCheckpointError,
)
from awaken_s3.ids import InvalidIdError, validate_run_id
from awaken_s3.models import (
    DEFAULT_MAX_CHECKPOINT_BYTES,
    StoredCheckpoint,
    StreamCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
)

_T = TypeVar("_T")

LOCK_NAME: Final = ".lock"
SUFFIX: Final = ".ckpt"
_TMP_PREFIX: Final = ".tmp-"
_MAGIC: Final = b"awaken-fs-checkpoint/1 "
_VERSION_RE: Final = re.compile(rb"[0-9a-f]{32}")


def encode_file(version: str, body: bytes) -> bytes:
    """The on-disk form of one checkpoint: header line with the version, then the body."""
    return _MAGIC + version.encode("ascii") + b"\n" + body


#: the version of a file whose header cannot be read (no writer ever holds it)
UNREADABLE_VERSION: Final = ""


def decode_file(data: bytes, *, run_id: str) -> tuple[str, bytes]:
    """Split a checkpoint file into (version, body); a malformed header is corruption."""
    header, newline, body = data.partition(b"\n")
    token = header.removeprefix(_MAGIC)
    if not newline or not header.startswith(_MAGIC) or _VERSION_RE.fullmatch(token) is None:
        raise CheckpointCorrupt(
            f"checkpoint file for run {run_id} has no valid version header",
            run_id=run_id,
            version=UNREADABLE_VERSION,
        )
    return token.decode("ascii"), body


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FsStreamCheckpointStore:
    """Durable single-process checkpoints in ``directory`` (created if missing).

    Open takes the directory's lock; :meth:`close` (or leaving ``async with``)
    releases it. Operations run in a worker thread so fsync never blocks the
    event loop; a thread lock makes each compare-and-swap atomic, whichever
    event loop or thread calls.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES
    ) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self._mutex = threading.Lock()
        self._closed = False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StreamCheckpointError(
                f"cannot open checkpoint directory {self.directory}: {exc}"
            ) from exc
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._read_holder()
            os.close(self._lock_fd)
            raise StoreLocked(
                f"checkpoint directory {self.directory} is owned by another process"
                f"{f' (pid {holder})' if holder else ''}; "
                "one process at a time may open a filesystem store"
            ) from None
        # Only the owner writes its pid, so a refused opener can name the owner.
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, str(os.getpid()).encode("ascii"), 0)
        self._remove_stale_temp_files()

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        validate_run_id(run_id)
        entry = await self._run("get", run_id, lambda: self._read(run_id))
        if entry is None:
            return None
        version, body = entry
        checkpoint = decode_checkpoint(
            body, run_id=run_id, max_bytes=self.max_bytes, version=version
        )
        return StoredCheckpoint(checkpoint=checkpoint, version=version)

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        run_id = validate_run_id(checkpoint.run_id)
        body = encode_checkpoint(checkpoint, max_bytes=self.max_bytes)
        return await self._run("put", run_id, lambda: self._put(run_id, body, expected_version))

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        validate_run_id(run_id)
        await self._run("delete", run_id, lambda: self._delete(run_id, expected_version))

    async def list_run_ids(self, *, modified_before: datetime | None = None) -> AsyncIterator[str]:
        cutoff = None if modified_before is None else modified_before.timestamp()

        def names() -> list[str]:
            found = sorted(os.listdir(self.directory))
            if cutoff is None:
                return found
            older = []
            for name in found:
                with contextlib.suppress(FileNotFoundError):  # deleted since it was listed
                    if os.stat(os.path.join(self.directory, name)).st_mtime < cutoff:
                        older.append(name)
            return older

        for name in await self._run("list", None, names):
            if not name.endswith(SUFFIX):
                continue
            try:
                yield validate_run_id(name[: -len(SUFFIX)])
            except InvalidIdError:
                continue

    def close(self) -> None:
        """Release the directory lock. Idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            os.close(self._lock_fd)

    async def aclose(self) -> None:
        """Async spelling of :meth:`close`, matching the S3 store."""
        self.close()

    async def __aenter__(self) -> FsStreamCheckpointStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __enter__(self) -> FsStreamCheckpointStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def path_for(self, run_id: str) -> Path:
        return self.directory / f"{validate_run_id(run_id)}{SUFFIX}"

    async def _run(self, operation: str, run_id: str | None, work: Callable[[], _T]) -> _T:
        def locked() -> _T:
            with self._mutex:
                if self._closed:
                    raise StreamCheckpointError(
                        f"filesystem checkpoint store {self.directory} is closed", run_id=run_id
                    )
                return work()

        try:
            return await asyncio.to_thread(locked)
        except OSError as exc:
            what = f"checkpoint for run {run_id}" if run_id else "checkpoints"
            raise StreamCheckpointError(
                f"{operation} of {what} in {self.directory} failed: {exc}", run_id=run_id
            ) from exc

    def _read(self, run_id: str) -> tuple[str, bytes] | None:
        path = self.path_for(run_id)
        try:
            with path.open("rb") as handle:
                # The header adds < 100 bytes; read one past the limit to detect excess.
                data = handle.read(self.max_bytes + 128)
        except FileNotFoundError:
            return None
        return decode_file(data, run_id=run_id)

    def _current_version(self, run_id: str) -> str | None:
        path = self.path_for(run_id)
        try:
            with path.open("rb") as handle:
                header = handle.readline(len(_MAGIC) + 64)
        except FileNotFoundError:
            return None
        try:
            version, _ = decode_file(header, run_id=run_id)
        except CheckpointCorrupt:
            # A corrupt file has no version any writer could hold: every conditional
            # write against it loses; a delete at UNREADABLE_VERSION (or none) wins.
            return UNREADABLE_VERSION
        return version

    def _put(self, run_id: str, body: bytes, expected_version: str | None) -> str:
        current = self._current_version(run_id)
        if expected_version is None and current is not None:
            raise CheckpointFenced(f"checkpoint for run {run_id} already exists", run_id=run_id)
        if expected_version is not None and current != expected_version:
            raise CheckpointFenced(
                f"checkpoint for run {run_id} is not at version {expected_version}",
                run_id=run_id,
            )
        version = uuid.uuid4().hex
        target = self.path_for(run_id)
        tmp = self.directory / f"{_TMP_PREFIX}{run_id}-{version}"
        try:
            with tmp.open("xb") as handle:
                handle.write(encode_file(version, body))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        _fsync_dir(self.directory)
        return version

    def _delete(self, run_id: str, expected_version: str | None) -> None:
        current = self._current_version(run_id)
        if current is None:
            return
        if expected_version is not None and current != expected_version:
            raise CheckpointFenced(
                f"checkpoint for run {run_id} is not at version {expected_version}",
                run_id=run_id,
            )
        with contextlib.suppress(FileNotFoundError):
            self.path_for(run_id).unlink()
        _fsync_dir(self.directory)

    def _read_holder(self) -> str:
        try:
            return os.pread(self._lock_fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return ""

    def _remove_stale_temp_files(self) -> None:
        # Only a crashed owner leaves temp files; we own the directory now.
        for leftover in self.directory.glob(f"{_TMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                leftover.unlink()
