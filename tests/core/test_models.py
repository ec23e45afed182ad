"""The checkpoint model and codec: what every backend stores and reads back."""

from __future__ import annotations

import json

import pytest

from awaken_s3 import (
    CheckpointCorrupt,
    CheckpointSchemaUnsupported,
    CheckpointTooLarge,
    InvalidIdError,
    PartialToolCall,
    StreamCheckpoint,
)
from awaken_s3.ids import MAX_ID_LENGTH, validate_run_id
from awaken_s3.models import decode_checkpoint, encode_checkpoint


def make(**overrides: object) -> StreamCheckpoint:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "thread_id": "thread-1",
        "model": "m",
        "turn": 2,
        "partial_text": "Grüße, 世界 🌍",
        "tool_calls": (
            PartialToolCall(
                index=0, id="call_a", name="lookup", arguments='{"q": "x"}', closed=True
            ),
            PartialToolCall(index=1, id="call_b", name="lookup", arguments='{"q": '),
        ),
        "retry_count": 1,
        "epoch": 3,
        "writer": "worker-a",
    }
    fields.update(overrides)
    return StreamCheckpoint.model_validate(fields)


def test_round_trip_keeps_every_field_and_multibyte_text() -> None:
    checkpoint = make()
    body = encode_checkpoint(checkpoint)
    assert decode_checkpoint(body, run_id="run-1") == checkpoint


def test_bodies_of_two_writers_differ_so_etags_differ() -> None:
    a = make(writer="worker-a", epoch=3)
    b = a.model_copy(update={"writer": "worker-b", "epoch": 4})
    assert encode_checkpoint(a) != encode_checkpoint(b)


@pytest.mark.parametrize(
    "bad",
    ["", "../etc", "a/b", "a.json", ".hidden", "-lead", "x" * (MAX_ID_LENGTH + 1), "é", "a b"],
)
def test_bad_run_ids_are_refused_before_io(bad: str) -> None:
    with pytest.raises(InvalidIdError):
        validate_run_id(bad)
    with pytest.raises(ValueError):
        make(run_id=bad)


def test_ids_at_the_length_limit_are_accepted() -> None:
    assert validate_run_id("a" * MAX_ID_LENGTH) == "a" * MAX_ID_LENGTH


def test_duplicate_tool_call_indices_are_refused() -> None:
    call = PartialToolCall(index=0, id="c", name="n")
    with pytest.raises(ValueError, match="unique"):
        make(tool_calls=(call, call))


def test_oversize_checkpoint_is_refused_on_encode() -> None:
    checkpoint = make(partial_text="x" * 2000)
    with pytest.raises(CheckpointTooLarge):
        encode_checkpoint(checkpoint, max_bytes=1000)


def test_oversize_body_is_corrupt_on_decode() -> None:
    body = encode_checkpoint(make(partial_text="x" * 2000))
    with pytest.raises(CheckpointCorrupt, match="limit"):
        decode_checkpoint(body, run_id="run-1", max_bytes=1000)


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe not utf-8",
        b"{not json",
        b"[1, 2, 3]",
        json.dumps({"run_id": "run-1", "thread_id": "t", "model": "m", "turn": 0}).encode(),
        json.dumps({"format": "awaken-s3/stream-checkpoint", "run_id": "run-1"}).encode(),
    ],
    ids=["not-utf8", "not-json", "not-object", "foreign-object", "missing-fields"],
)
def test_undecodable_or_foreign_bodies_are_corrupt(body: bytes) -> None:
    with pytest.raises(CheckpointCorrupt):
        decode_checkpoint(body, run_id="run-1")


def test_a_checkpoint_stored_under_another_run_is_corrupt() -> None:
    body = encode_checkpoint(make(run_id="run-2"))
    with pytest.raises(CheckpointCorrupt, match="belongs to run run-2"):
        decode_checkpoint(body, run_id="run-1")


@pytest.mark.parametrize(
    ("schema_version", "error"),
    [
        (2, CheckpointSchemaUnsupported),
        (99, CheckpointSchemaUnsupported),
        (0, CheckpointCorrupt),
        (-1, CheckpointCorrupt),
        ("2", CheckpointCorrupt),
    ],
)
def test_a_newer_schema_version_is_unsupported_and_anything_else_odd_is_corrupt(
    schema_version: object, error: type[Exception]
) -> None:
    payload = json.loads(encode_checkpoint(make()))
    payload["schema_version"] = schema_version
    with pytest.raises(error, match="schema_version") as caught:
        decode_checkpoint(json.dumps(payload).encode(), run_id="run-1", version="v7")
    assert getattr(caught.value, "version", None) == "v7"


def test_a_newer_schema_object_naming_another_run_is_corrupt() -> None:
    payload = json.loads(encode_checkpoint(make(run_id="run-2")))
    payload["schema_version"] = 2
    with pytest.raises(CheckpointCorrupt):
        decode_checkpoint(json.dumps(payload).encode(), run_id="run-1")


def test_corruption_carries_the_version_that_was_judged() -> None:
    with pytest.raises(CheckpointCorrupt) as caught:
        decode_checkpoint(b"[" * 100_000, run_id="run-1", version='"etag-1"')
    assert caught.value.version == '"etag-1"'
    assert caught.value.run_id == "run-1"


def test_unknown_fields_are_refused_not_silently_dropped() -> None:
    payload = json.loads(encode_checkpoint(make()))
    payload["api_key"] = "sk-should-never-be-here"
    with pytest.raises(CheckpointCorrupt):
        decode_checkpoint(json.dumps(payload).encode(), run_id="run-1")
