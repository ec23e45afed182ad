"""What each S3 answer means for a checkpoint writer, decided without a server.

Response dicts have the shape botocore gives ``ClientError.response``; the
concrete codes/statuses are the ones AWS, moto 5.2 and SeaweedFS 4.48 send.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import pytest

from awaken_s3.ids import InvalidIdError
from awaken_s3.stores import s3_protocol as proto
from awaken_s3.stores.s3_protocol import Action, S3ErrorKind


def response(code: str | None, status: int | None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if code is not None:
        result["Error"] = {"Code": code, "Message": "m"}
    if status is not None:
        result["ResponseMetadata"] = {"HTTPStatusCode": status}
    return result


PRECONDITION = response("PreconditionFailed", 412)
NO_SUCH_KEY = response("NoSuchKey", 404)
HEAD_NOT_FOUND = response("404", 404)  # HEAD has no body: botocore reports the status
CONFLICT = response("ConditionalRequestConflict", 409)
NO_SUCH_BUCKET = response("NoSuchBucket", 404)
ACCESS_DENIED = response("AccessDenied", 403)
INTERNAL = response("InternalError", 500)
SLOW_DOWN = response("SlowDown", 503)
OTHER_409 = response("OperationAborted", 409)


@pytest.mark.parametrize(
    ("resp", "kind"),
    [
        (PRECONDITION, S3ErrorKind.PRECONDITION_FAILED),
        (response(None, 412), S3ErrorKind.PRECONDITION_FAILED),
        (NO_SUCH_KEY, S3ErrorKind.NO_SUCH_KEY),
        (HEAD_NOT_FOUND, S3ErrorKind.NO_SUCH_KEY),
        (response("NotFound", 404), S3ErrorKind.NO_SUCH_KEY),
        (CONFLICT, S3ErrorKind.CONFLICT),
        (NO_SUCH_BUCKET, S3ErrorKind.OTHER),
        (ACCESS_DENIED, S3ErrorKind.OTHER),
        (INTERNAL, S3ErrorKind.OTHER),
        (OTHER_409, S3ErrorKind.OTHER),
        ({}, S3ErrorKind.OTHER),
    ],
)
def test_classify_error(resp: dict[str, Any], kind: S3ErrorKind) -> None:
    assert proto.classify_error(resp) is kind


def test_missing_bucket_is_never_mistaken_for_a_missing_checkpoint() -> None:
    assert proto.get_action(NO_SUCH_BUCKET) is Action.FAIL
    assert proto.delete_action(NO_SUCH_BUCKET, conditional=True) is Action.FAIL
    assert proto.put_action(NO_SUCH_BUCKET, replacing=True) is Action.FAIL


@pytest.mark.parametrize("replacing", [False, True])
def test_put_412_is_fenced_for_create_and_replace(replacing: bool) -> None:
    assert proto.put_action(PRECONDITION, replacing=replacing) is Action.FENCED


def test_put_if_match_on_a_missing_key_is_fenced_on_aws_and_seaweedfs() -> None:
    # AWS and moto answer 404 NoSuchKey, SeaweedFS answers 412: both mean "lost".
    assert proto.put_action(NO_SUCH_KEY, replacing=True) is Action.FENCED
    assert proto.put_action(PRECONDITION, replacing=True) is Action.FENCED


def test_put_404_on_create_is_a_failure_not_a_fence() -> None:
    assert proto.put_action(NO_SUCH_KEY, replacing=False) is Action.FAIL


@pytest.mark.parametrize("replacing", [False, True])
def test_put_conflict_409_is_retried(replacing: bool) -> None:
    assert proto.put_action(CONFLICT, replacing=replacing) is Action.RETRY


@pytest.mark.parametrize("resp", [ACCESS_DENIED, INTERNAL, SLOW_DOWN, OTHER_409, {}])
def test_everything_else_fails_put_get_and_delete(resp: dict[str, Any]) -> None:
    assert proto.put_action(resp, replacing=True) is Action.FAIL
    assert proto.put_action(resp, replacing=False) is Action.FAIL
    assert proto.get_action(resp) is Action.FAIL
    assert proto.delete_action(resp, conditional=True) is Action.FAIL
    assert proto.delete_action(resp, conditional=False) is Action.FAIL


def test_get_of_a_missing_key_is_absent() -> None:
    assert proto.get_action(NO_SUCH_KEY) is Action.ABSENT
    assert proto.head_action(NO_SUCH_KEY) is Action.ABSENT
    assert proto.head_action(HEAD_NOT_FOUND) is Action.ABSENT


@pytest.mark.parametrize("resp", [HEAD_NOT_FOUND, response("", 404), response("NotFound", 404)])
def test_a_bare_404_to_a_get_is_not_a_missing_checkpoint(resp: dict[str, Any]) -> None:
    # S3 answers a GET of a missing key with a NoSuchKey body; a bare 404 is some other
    # server (a wrong endpoint): reading it as "no checkpoint" would hide the mistake.
    assert proto.get_action(resp) is Action.FAIL
    assert proto.head_action(NO_SUCH_BUCKET) is Action.FAIL


@pytest.mark.parametrize("conditional", [False, True])
def test_delete_of_a_missing_key_is_done(conditional: bool) -> None:
    assert proto.delete_action(NO_SUCH_KEY, conditional=conditional) is Action.ABSENT


def test_conditional_delete_412_is_ambiguous_and_probed() -> None:
    assert proto.delete_action(PRECONDITION, conditional=True) is Action.PROBE
    assert proto.probe_action(exists=True) is Action.FENCED
    assert proto.probe_action(exists=False) is Action.ABSENT


def test_delete_conflict_409_is_retried() -> None:
    assert proto.delete_action(CONFLICT, conditional=True) is Action.RETRY


def test_backoff_grows_exponentially_is_capped_and_jittered() -> None:
    delays = [proto.backoff_delay(n, base=0.05, cap=1.0, jitter=1.0) for n in range(8)]
    assert delays[:5] == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8])
    assert delays[5:] == [1.0, 1.0, 1.0]
    assert proto.backoff_delay(3, base=0.05, cap=1.0, jitter=0.5) == pytest.approx(0.2)
    assert proto.backoff_delay(3, base=0.05, cap=1.0, jitter=0.0) == 0.0


@pytest.mark.parametrize(("attempt", "jitter"), [(-1, 0.5), (0, -0.1), (0, 1.5)])
def test_backoff_rejects_nonsense(attempt: int, jitter: float) -> None:
    with pytest.raises(ValueError):
        proto.backoff_delay(attempt, base=0.05, cap=1.0, jitter=jitter)


def test_object_key_is_prefix_shard_run_id_json() -> None:
    shard = hashlib.sha256(b"run-7").hexdigest()[:2]
    assert proto.object_key("checkpoints/", "run-7") == f"checkpoints/{shard}/run-7.json"
    assert proto.object_key("", "run_7").endswith("/run_7.json")
    assert proto.legacy_key("checkpoints/", "run-7") == "checkpoints/run-7.json"


def test_shards_spread_runs_over_256_prefixes_evenly() -> None:
    prefixes = proto.shard_prefixes("checkpoints/")
    assert len(prefixes) == len(set(prefixes)) == 256
    assert prefixes[0] == "checkpoints/00/" and prefixes[-1] == "checkpoints/ff/"
    counts = Counter(proto.shard_of(f"r-{n}") for n in range(25_600))
    assert set(counts) == {p.split("/")[1] for p in prefixes}
    # 100 expected per shard: a hash that clumped runs would overload one S3 partition.
    assert max(counts.values()) < 150 and min(counts.values()) > 50


def test_a_legacy_version_goes_back_to_the_legacy_key() -> None:
    legacy = proto.legacy_version('"e1"')
    target = proto.write_target("checkpoints/", "run-7", legacy)
    assert (target.key, target.etag, target.legacy) == ("checkpoints/run-7.json", '"e1"', True)
    assert proto.tag_version(target, '"e2"') == proto.legacy_version('"e2"')
    sharded = proto.write_target("checkpoints/", "run-7", '"e1"')
    assert (sharded.key, sharded.etag) == (proto.object_key("checkpoints/", "run-7"), '"e1"')
    assert proto.tag_version(sharded, '"e2"') == '"e2"'
    # The tag sits inside the quotes: shown or hashed, the version is still one quoted token.
    assert proto.legacy_version('"e1"') == '"legacy:e1"'
    assert proto.etag_of(proto.legacy_version('"e1"')) == '"e1"'
    assert proto.etag_of(proto.legacy_version("e1")) == "e1"
    assert not proto.is_legacy_version('"0123abcd-2"')
    created = proto.write_target("checkpoints/", "run-7", None)
    assert (created.key, created.etag, created.legacy) == (sharded.key, None, False)


def test_deleting_a_sharded_checkpoint_clears_the_legacy_one_after_it() -> None:
    sharded = proto.object_key("checkpoints/", "run-7")
    targets = proto.delete_targets("checkpoints/", "run-7", '"e1"')
    assert [(t.key, t.etag) for t in targets] == [(sharded, '"e1"')]
    assert proto.legacy_leftover("checkpoints/", "run-7", '"e1"') == "checkpoints/run-7.json"
    # A delete at a legacy version never touches a sharded object created since.
    legacy_version = proto.legacy_version('"e1"')
    legacy = proto.delete_targets("checkpoints/", "run-7", legacy_version)
    assert [(t.key, t.etag) for t in legacy] == [("checkpoints/run-7.json", '"e1"')]
    assert proto.legacy_leftover("checkpoints/", "run-7", legacy_version) is None
    blind = proto.delete_targets("checkpoints/", "run-7", None)
    assert [(t.key, t.etag) for t in blind] == [(sharded, None), ("checkpoints/run-7.json", None)]


@pytest.mark.parametrize("bad", ["../x", "a/b", "", "x" * 129, "a.b"])
def test_object_key_refuses_bad_run_ids(bad: str) -> None:
    with pytest.raises(InvalidIdError):
        proto.object_key("checkpoints/", bad)


def test_create_params_use_if_none_match_and_json_content_type() -> None:
    params = proto.put_params(
        bucket="b", key="k", body=b"{}", expected_version=None, kms_key_id=None
    )
    assert params == {
        "Bucket": "b",
        "Key": "k",
        "Body": b"{}",
        "ContentType": "application/json",
        "IfNoneMatch": "*",
    }


def test_replace_params_use_if_match_with_the_etag_verbatim() -> None:
    params = proto.put_params(
        bucket="b", key="k", body=b"{}", expected_version='"abc"', kms_key_id=None
    )
    assert params["IfMatch"] == '"abc"'
    assert "IfNoneMatch" not in params


def test_kms_key_adds_sse_kms_parameters() -> None:
    params = proto.put_params(
        bucket="b", key="k", body=b"{}", expected_version=None, kms_key_id="alias/ckpt"
    )
    assert params["ServerSideEncryption"] == "aws:kms"
    assert params["SSEKMSKeyId"] == "alias/ckpt"


def test_delete_params_are_conditional_only_with_a_version() -> None:
    assert proto.delete_params(bucket="b", key="k", expected_version=None) == {
        "Bucket": "b",
        "Key": "k",
    }
    assert proto.delete_params(bucket="b", key="k", expected_version='"e"')["IfMatch"] == '"e"'


def test_describe_names_code_and_status() -> None:
    assert proto.describe(ACCESS_DENIED) == "AccessDenied (HTTP 403)"
    assert proto.describe({}) == "unknown error"


def test_was_retried_reads_botocore_retry_attempts() -> None:
    assert proto.was_retried({"ResponseMetadata": {"RetryAttempts": 2}})
    assert not proto.was_retried({"ResponseMetadata": {"RetryAttempts": 0}})
    assert not proto.was_retried(PRECONDITION)
    assert not proto.was_retried({})


@pytest.mark.parametrize(
    ("key", "run_id"),
    [
        ("checkpoints/run-1.json", "run-1"),
        (f"checkpoints/{hashlib.sha256(b'run-1').hexdigest()[:2]}/run-1.json", "run-1"),
        ("checkpoints/00/run-1.json", None),
        ("checkpoints/run-1.json.bak", None),
        ("checkpoints/nested/run-1.json", None),
        ("checkpoints/../x.json", None),
        ("checkpoints/.json", None),
        ("messages/run-1.json", None),
        ("checkpoints/run-1.txt", None),
    ],
)
def test_only_keys_the_store_would_write_are_listed_as_runs(key: str, run_id: str | None) -> None:
    assert proto.run_id_from_key("checkpoints/", key) == run_id
