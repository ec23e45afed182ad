"""``awaken-s3 checkpoints show|list|clean`` against S3 and DynamoDB on a moto server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from awaken_s3.cli import main
from awaken_s3.local.moto import MotoServer
from awaken_s3.messages import ThinkingBlock
from awaken_s3.models import PartialToolCall, StreamCheckpoint
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.stores.s3_protocol import object_key
from tests.fixtures.aws import AwsTarget, aws_clients, dynamo_store, fresh_target
from tests.ops.world import seed_ended_and_live


@pytest.fixture
def aws(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    target = asyncio.run(_seed(moto_server.endpoint_url))
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint_url)
    monkeypatch.setenv("AWAKEN_BUCKET", target.bucket)
    monkeypatch.setenv("AWAKEN_TABLE", target.table)
    return target.bucket, target.table


def _checkpoint(run_id: str, turn: int = 0) -> StreamCheckpoint:
    return StreamCheckpoint(
        run_id=run_id,
        thread_id="thread-1",
        model="m",
        turn=turn,
        partial_text="The answer is",
        tool_calls=(
            PartialToolCall(
                index=0, id="call_1", name="lookup", arguments='{"q": "x"}', closed=True
            ),
            PartialToolCall(index=1, id="call_2", name="lookup", arguments='{"q": '),
        ),
        epoch=1,
        writer="worker-a",
        reusable_blocks=(ThinkingBlock(thinking="Look it up.", signature="c2ln"),),
    )


async def _seed(endpoint: str) -> AwsTarget:
    async with aws_clients(endpoint) as (db, s3):
        target = await fresh_target(db, s3, endpoint)
        bucket = target.bucket
        await seed_ended_and_live(dynamo_store(db, s3, target))
        store = S3StreamCheckpointStore(bucket, client=s3)
        for run_id in ("live", "done", "orphan"):
            await store.put(_checkpoint(run_id), expected_version=None)
        # Foreign objects under and beside the prefix are not checkpoints to list.
        await s3.put_object(Bucket=bucket, Key="checkpoints/README.txt", Body=b"x")
        await s3.put_object(Bucket=bucket, Key="messages/thread-1/0.json", Body=b"{}")
        return target


@pytest.mark.slow
def test_show_prints_the_partial_and_the_plan_it_implies(
    aws: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["checkpoints", "show", "live"]) == 0
    out = capsys.readouterr().out
    assert f"s3://{aws[0]}/{object_key('checkpoints/', 'live')}" in out
    assert "tool call #1 lookup (call_2): open" in out
    assert "recovery plan: R2" in out
    assert "drops #1 lookup" in out
    assert "complete blocks carried by a resume: thinking" in out

    assert main(["checkpoints", "show", "live", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["plan"] == "R2"
    assert document["dropped_tool_calls"] == ["call_2"]
    assert document["checkpoint"]["partial_text"] == "The answer is"


@pytest.mark.slow
def test_show_of_a_missing_run_fails_and_a_bad_id_is_refused(
    aws: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["checkpoints", "show", "nobody"]) == 1
    assert "no checkpoint for run nobody" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["checkpoints", "show", "../etc/passwd"])
    assert exited.value.code == 2


async def _put_checkpoints(endpoint: str, bucket: str, run_ids: list[str]) -> None:
    async with aws_clients(endpoint) as (_, s3):
        store = S3StreamCheckpointStore(bucket, client=s3)
        for run_id in run_ids:
            await store.put(_checkpoint(run_id), expected_version=None)


@pytest.mark.slow
def test_show_finds_a_run_by_the_id_its_caller_knows(
    aws: tuple[str, str], moto_server: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API stores a caller's run ``r1`` as ``<owner tag>-r1``: ``show r1`` finds it, as
    ``runs watch r1`` does; the stored id, as ``list`` prints it, still works."""
    from awaken_s3.service.scoping import scoped_id

    mine, shared_a, shared_b = (
        scoped_id("user-a", "r1"),
        scoped_id("user-a", "shared"),
        scoped_id("user-b", "shared"),
    )
    asyncio.run(_put_checkpoints(moto_server.endpoint_url, aws[0], [mine, shared_a, shared_b]))

    assert main(["checkpoints", "show", "r1"]) == 0
    assert f"s3://{aws[0]}/{object_key('checkpoints/', mine)}" in capsys.readouterr().out
    assert main(["checkpoints", "show", mine, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoint"]["run_id"] == mine

    # Two callers chose the same run id: both are named, and the caller picks one.
    assert main(["checkpoints", "show", "shared"]) == 1
    err = capsys.readouterr().err
    assert "2 checkpoints answer to run shared" in err and shared_a in err and shared_b in err
    assert main(["checkpoints", "show", "shared", "--owner", "user-b"]) == 0
    assert object_key("checkpoints/", shared_b) in capsys.readouterr().out
    assert main(["checkpoints", "show", "r1", "--owner", "user-b"]) == 1
    assert "no checkpoint for run" in capsys.readouterr().err


@pytest.mark.slow
def test_list_judges_every_checkpoint_and_clean_removes_only_stale_ones(
    aws: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["checkpoints", "list"]) == 0
    lines = sorted(capsys.readouterr().out.splitlines())
    assert len(lines) == 3
    assert lines[0].startswith("done") and "stale: its run is completed" in lines[0]
    assert lines[1].startswith("live") and lines[1].endswith("live")
    assert lines[2].startswith("orphan") and "its run does not exist" in lines[2]

    assert main(["checkpoints", "clean", "--dry-run"]) == 0
    dry = capsys.readouterr()
    assert "2 would be deleted (dry run: nothing was deleted)" in dry.err
    assert sorted(line.split()[1:3] for line in dry.out.splitlines()) == [
        ["would", "delete"],
        ["would", "delete"],
    ]
    assert main(["checkpoints", "clean"]) == 0
    assert "2 deleted" in capsys.readouterr().err
    assert main(["checkpoints", "list"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["live"]


@pytest.mark.slow
def test_clean_leaves_a_checkpoint_of_a_newer_build_alone(
    aws: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3

    from awaken_s3.models import encode_checkpoint

    payload = json.loads(encode_checkpoint(_checkpoint("future")))
    payload["schema_version"] = 2
    s3 = boto3.client("s3")
    s3.put_object(Bucket=aws[0], Key="checkpoints/future.json", Body=json.dumps(payload))

    assert main(["checkpoints", "list"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("future")]
    assert "newer schema_version 2: left alone" in line
    assert main(["checkpoints", "clean"]) == 0
    captured = capsys.readouterr()
    assert "2 deleted, 1 left alone (written by a newer build)" in captured.err
    assert s3.get_object(Bucket=aws[0], Key="checkpoints/future.json")["Body"].read()
    assert main(["checkpoints", "show", "future"]) == 1
    assert "written by a newer awaken-s3" in capsys.readouterr().err


@pytest.mark.slow
def test_list_show_and_clean_find_a_checkpoint_an_older_build_left_at_the_flat_key(
    aws: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3

    from awaken_s3.models import encode_checkpoint

    s3 = boto3.client("s3")
    s3.put_object(
        Bucket=aws[0], Key="checkpoints/relic.json", Body=encode_checkpoint(_checkpoint("relic"))
    )
    assert main(["checkpoints", "show", "relic"]) == 0
    assert f"s3://{aws[0]}/checkpoints/relic.json" in capsys.readouterr().out
    assert main(["checkpoints", "list"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("relic")]
    assert "its run does not exist" in line
    assert main(["checkpoints", "clean"]) == 0
    assert "3 deleted" in capsys.readouterr().err
    assert "Contents" not in s3.list_objects_v2(Bucket=aws[0], Prefix="checkpoints/relic")


def test_missing_settings_are_a_clear_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AWAKEN_BUCKET", raising=False)
    monkeypatch.delenv("AWAKEN_TABLE", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["checkpoints", "list"])
    assert exited.value.code == 2
    assert "AWAKEN_BUCKET, AWAKEN_TABLE" in capsys.readouterr().err


@pytest.mark.slow
def test_an_unreachable_backend_is_an_error_line_not_a_traceback(
    aws: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWAKEN_BUCKET", "no-such-bucket-here")
    assert main(["checkpoints", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: bucket no-such-bucket-here does not exist at S3 http://127.0.0.1")
    assert err.rstrip().endswith("(AWAKEN_BUCKET)")
    assert "Traceback" not in err


@pytest.mark.slow
def test_show_needs_no_table(
    aws: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AWAKEN_TABLE")
    assert main(["checkpoints", "show", "live"]) == 0
    assert "recovery plan: R2" in capsys.readouterr().out


def test_an_endpoint_that_is_not_a_url_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWAKEN_BUCKET", "b")
    monkeypatch.setenv("AWAKEN_TABLE", "t")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "not-a-url")
    with pytest.raises(SystemExit) as exited:
        main(["checkpoints", "list"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "AWS_ENDPOINT_URL='not-a-url' is not an endpoint URL" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_an_endpoint_nobody_listens_on_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from awaken_s3.local.ports import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWAKEN_BUCKET", "b")
    monkeypatch.setenv("AWAKEN_TABLE", "t")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    assert main(["checkpoints", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach S3 at {endpoint} (bucket b)")


@pytest.mark.slow
def test_a_server_that_is_not_s3_answering_404_is_an_error_not_no_checkpoint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import subprocess
    import sys

    from awaken_s3.local.ports import free_port, wait_for_port

    port = free_port()
    # A plain file server answers every S3 path with a bare 404.
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        monkeypatch.setenv("AWAKEN_BUCKET", "b")
        monkeypatch.delenv("AWAKEN_TABLE", raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        assert main(["checkpoints", "show", "r1"]) == 1
        err = capsys.readouterr().err
        assert "answered a bare 404: is the endpoint an S3 server?" in err
        assert "no checkpoint" not in err
    finally:
        server.kill()
        server.wait()


@pytest.mark.slow
def test_missing_credentials_name_the_bucket_and_the_variables(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from awaken_s3.local.ports import free_port

    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("AWS_") and not name.startswith("AWAKEN_")
    }
    env.update(
        AWAKEN_BUCKET="b",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}",
        # Nowhere else to find credentials: no files, no instance metadata.
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    done = subprocess.run(
        [sys.executable, "-m", "awaken_s3.cli", "checkpoints", "show", "r1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: no AWS credentials found for bucket b: set AWS_PROFILE")
    assert "Traceback" not in done.stderr


def test_the_checkpoints_help_names_every_variable_it_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import re

    import awaken_s3.settings

    # Every AWAKEN_* variable the storage settings read, and botocore's own the help promises.
    read = set(re.findall(r"AWAKEN_[A-Z_]+", Path(awaken_s3.settings.__file__).read_text()))
    assert {"AWAKEN_BUCKET", "AWAKEN_TABLE", "AWAKEN_CHECKPOINT_PREFIX"} <= read
    botocore = {"AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID"}
    for action in ([], ["show"], ["list"], ["clean"]):
        with pytest.raises(SystemExit):
            main(["checkpoints", *action, "--help"])
        out = capsys.readouterr().out
        for name in read - {"AWAKEN_QUEUE_URL"} | botocore:
            assert name in out, (action, name)
