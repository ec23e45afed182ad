"""The StreamCheckpointStore contract, written once, run against every backend.

Backends: memory, fs, S3 on moto in this process, S3 on a moto server process,
S3 on a real SeaweedFS server. A writer that lost a conditional write must be
fenced by the storage itself, never by a client-side check.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from awaken_s3.errors import (
    CheckpointCorrupt,
    CheckpointFenced,
    CheckpointSchemaUnsupported,
    StreamCheckpointError,
)
from awaken_s3.ids import InvalidIdError
from awaken_s3.models import CHECKPOINT_FORMAT, StreamCheckpoint, encode_checkpoint
from awaken_s3.stores.base import ListableCheckpointStore, StreamCheckpointStore
from tests.fixtures.aws import s3_client
from tests.stores.conftest import Backend, make_checkpoint
from tests.stores.faults import error_response


async def test_backend_satisfies_the_protocol(backend: Backend) -> None:
    assert isinstance(backend.store, StreamCheckpointStore)


async def test_get_of_a_missing_run_is_none(backend: Backend) -> None:
    assert await backend.store.get("never-written") is None


async def test_create_then_get_round_trips_the_checkpoint(backend: Backend) -> None:
    checkpoint = make_checkpoint(partial_text="Grüße 🌍 ", retry_count=2)
    version = await backend.store.put(checkpoint, expected_version=None)
    stored = await backend.store.get("run-1")
    assert stored is not None
    assert stored.checkpoint == checkpoint
    assert stored.version == version


async def test_replace_at_the_current_version_succeeds_with_a_new_version(
    backend: Backend,
) -> None:
    store = backend.store
    first = await store.put(make_checkpoint(partial_text="a"), expected_version=None)
    second = await store.put(make_checkpoint(partial_text="ab"), expected_version=first)
    assert second != first
    third = await store.put(make_checkpoint(partial_text="abc"), expected_version=second)
    stored = await store.get("run-1")
    assert stored is not None
    assert (stored.checkpoint.partial_text, stored.version) == ("abc", third)


async def test_create_only_conflicts_when_the_checkpoint_exists(backend: Backend) -> None:
    store = backend.store
    await store.put(make_checkpoint(writer="first"), expected_version=None)
    with pytest.raises(CheckpointFenced):
        await store.put(make_checkpoint(writer="second"), expected_version=None)
    stored = await store.get("run-1")
    assert stored is not None and stored.checkpoint.writer == "first"


async def test_stale_replace_is_fenced_and_the_newer_object_kept(backend: Backend) -> None:
    store = backend.store
    v1 = await store.put(make_checkpoint(writer="a", partial_text="1"), expected_version=None)
    v2 = await store.put(make_checkpoint(writer="b", partial_text="12"), expected_version=v1)
    with pytest.raises(CheckpointFenced):
        await store.put(make_checkpoint(writer="a", partial_text="1x"), expected_version=v1)
    stored = await store.get("run-1")
    assert stored is not None
    assert (stored.checkpoint.writer, stored.version) == ("b", v2)


async def test_replace_of_a_deleted_checkpoint_is_fenced(backend: Backend) -> None:
    store = backend.store
    version = await store.put(make_checkpoint(), expected_version=None)
    await store.delete("run-1")
    with pytest.raises(CheckpointFenced):
        await store.put(make_checkpoint(partial_text="zombie"), expected_version=version)
    assert await store.get("run-1") is None


async def test_replace_of_a_never_written_checkpoint_is_fenced(backend: Backend) -> None:
    version = await backend.store.put(make_checkpoint("run-other"), expected_version=None)
    with pytest.raises(CheckpointFenced):
        await backend.store.put(make_checkpoint("run-1"), expected_version=version)
    assert await backend.store.get("run-1") is None


async def test_conditional_delete_with_a_stale_version_is_fenced_and_keeps_the_object(
    backend: Backend,
) -> None:
    store = backend.store
    v1 = await store.put(make_checkpoint(partial_text="1"), expected_version=None)
    v2 = await store.put(make_checkpoint(partial_text="12"), expected_version=v1)
    with pytest.raises(CheckpointFenced):
        await store.delete("run-1", expected_version=v1)
    stored = await store.get("run-1")
    assert stored is not None and stored.version == v2


async def test_conditional_delete_at_the_current_version_removes_it(backend: Backend) -> None:
    store = backend.store
    version = await store.put(make_checkpoint(), expected_version=None)
    await store.delete("run-1", expected_version=version)
    assert await store.get("run-1") is None
    # The run can start over with a create.
    await store.put(make_checkpoint(writer="next"), expected_version=None)


async def test_delete_is_idempotent_conditional_or_not(backend: Backend) -> None:
    store = backend.store
    version = await store.put(make_checkpoint(), expected_version=None)
    await store.delete("run-1")
    await store.delete("run-1")
    await store.delete("run-1", expected_version=version)
    await store.delete("never-written", expected_version=version)
    assert await store.get("run-1") is None


async def test_checkpoints_of_different_runs_are_independent(backend: Backend) -> None:
    store = backend.store
    await store.put(make_checkpoint("run-a", partial_text="A"), expected_version=None)
    await store.put(make_checkpoint("run-b", partial_text="B"), expected_version=None)
    await store.delete("run-a")
    stored = await store.get("run-b")
    assert stored is not None and stored.checkpoint.partial_text == "B"


async def test_sixteen_concurrent_writers_racing_one_version_have_exactly_one_winner(
    backend: Backend,
) -> None:
    store = backend.store
    base = await store.put(make_checkpoint(writer="origin"), expected_version=None)
    contenders = [
        make_checkpoint(writer=f"worker-{i}", epoch=i + 2, partial_text=f"text of {i}")
        for i in range(16)
    ]
    results = await asyncio.gather(
        *(store.put(c, expected_version=base) for c in contenders), return_exceptions=True
    )
    winners = [i for i, result in enumerate(results) if isinstance(result, str)]
    losers = [result for result in results if not isinstance(result, str)]
    assert len(winners) == 1, results
    assert len(losers) == 15
    assert all(isinstance(loser, CheckpointFenced) for loser in losers), losers
    stored = await store.get("run-1")
    assert stored is not None
    assert stored.checkpoint == contenders[winners[0]]
    assert stored.version == results[winners[0]]


async def test_undecodable_object_is_corrupt(backend: Backend) -> None:
    await backend.plant("run-1", b"\x00\xffnot json at all")
    with pytest.raises(CheckpointCorrupt):
        await backend.store.get("run-1")


async def test_json_that_is_not_a_checkpoint_is_corrupt(backend: Backend) -> None:
    await backend.plant("run-1", json.dumps({"hello": "world"}).encode())
    with pytest.raises(CheckpointCorrupt):
        await backend.store.get("run-1")


async def test_checkpoint_of_another_run_under_this_key_is_corrupt(backend: Backend) -> None:
    await backend.plant("run-1", encode_checkpoint(make_checkpoint("run-2")))
    with pytest.raises(CheckpointCorrupt, match="run-2"):
        await backend.store.get("run-1")


async def test_a_newer_schema_version_is_unsupported_not_corrupt(backend: Backend) -> None:
    payload = json.loads(encode_checkpoint(make_checkpoint()))
    assert payload["format"] == CHECKPOINT_FORMAT
    payload["schema_version"] = 99
    await backend.plant("run-1", json.dumps(payload).encode())
    with pytest.raises(CheckpointSchemaUnsupported) as caught:
        await backend.store.get("run-1")
    assert not isinstance(caught.value, CheckpointCorrupt)
    assert caught.value.schema_version == 99
    assert caught.value.version
    payload["schema_version"] = 0
    await backend.plant("run-1", json.dumps(payload).encode())
    with pytest.raises(CheckpointCorrupt, match="schema_version"):
        await backend.store.get("run-1")


async def test_a_corrupt_checkpoint_is_deleted_at_the_version_judged(backend: Backend) -> None:
    store = backend.store
    await backend.plant("run-1", b"garbage")
    with pytest.raises(CheckpointFenced):
        await store.put(make_checkpoint(), expected_version=None)
    with pytest.raises(CheckpointCorrupt) as judged:
        await store.get("run-1")
    assert judged.value.version is not None
    # Something else lands under the key between the verdict and the delete: it is kept.
    await backend.plant("run-1", b"other garbage")
    with pytest.raises(CheckpointFenced):
        await store.delete("run-1", expected_version=judged.value.version)
    with pytest.raises(CheckpointCorrupt) as again:
        await store.get("run-1")
    await store.delete("run-1", expected_version=again.value.version)
    assert await store.get("run-1") is None
    await store.put(make_checkpoint(), expected_version=None)


async def test_listing_names_every_checkpointed_run_once(backend: Backend) -> None:
    store = backend.store
    assert isinstance(store, ListableCheckpointStore)
    assert [run_id async for run_id in store.list_run_ids()] == []
    for run_id in ("run-b", "run-a", "run-c"):
        await store.put(make_checkpoint(run_id), expected_version=None)
    await store.delete("run-c")
    # A corrupt object is still a checkpoint to list (an operator must see it to clean it).
    await backend.plant("run-d", b"garbage")
    listed = [run_id async for run_id in store.list_run_ids()]
    assert sorted(listed) == ["run-a", "run-b", "run-d"]


async def test_listing_can_leave_out_objects_written_lately(backend: Backend) -> None:
    # The sweeper reads only checkpoints nobody wrote for a while: a live turn's object is
    # not even opened. An hour either side: the server's clock, not the test's, stamps them.
    store = backend.store
    assert isinstance(store, ListableCheckpointStore)
    await store.put(make_checkpoint("run-a"), expected_version=None)
    await backend.plant("run-b", b"garbage")
    now = datetime.now(UTC)
    later = [r async for r in store.list_run_ids(modified_before=now + timedelta(hours=1))]
    assert sorted(later) == ["run-a", "run-b"]
    assert [r async for r in store.list_run_ids(modified_before=now - timedelta(hours=1))] == []


BAD_RUN_IDS = ["../escape", "a/b", "", "x" * 129, ".hidden", "run 1", "ünï", "a\x00b", "a.json"]


async def test_bad_run_ids_raise_before_any_io(backend: Backend) -> None:
    store = backend.store
    before = list(backend.injector.seen) if backend.injector else None
    for bad_id in BAD_RUN_IDS:
        # model_construct skips validation, as a caller bypassing the model could.
        fields = make_checkpoint().model_dump()
        fields["run_id"] = bad_id
        rogue = StreamCheckpoint.model_construct(**fields)
        with pytest.raises(InvalidIdError):
            await store.get(bad_id)
        with pytest.raises(InvalidIdError):
            await store.delete(bad_id)
        with pytest.raises(InvalidIdError):
            await store.delete(bad_id, expected_version="v")
        with pytest.raises(InvalidIdError):
            await store.put(rogue, expected_version=None)
    if backend.injector is not None:
        assert backend.injector.seen == before, "a request reached S3"


# --- S3 backends only: faults injected at the client --------------------------


async def test_s3_conflict_409_is_retried_until_the_write_lands(s3_backend: Backend) -> None:
    store, injector = s3_backend.store, s3_backend.injector
    assert injector is not None
    version = await store.put(make_checkpoint(partial_text="a"), expected_version=None)
    injector.arm(409, "ConditionalRequestConflict", count=2, operations={"PutObject"})
    new_version = await store.put(make_checkpoint(partial_text="ab"), expected_version=version)
    assert injector.injected == 2
    assert injector.seen[-3:] == ["PutObject"] * 3
    stored = await store.get("run-1")
    assert stored is not None
    assert (stored.checkpoint.partial_text, stored.version) == ("ab", new_version)


async def test_s3_conflict_retry_keeps_the_condition_so_a_lost_race_is_fenced(
    s3_backend: Backend,
) -> None:
    # A 409 means "retry the same conditional request", never "re-read and
    # overwrite": if another writer won meanwhile, the retry must be fenced.
    store, injector = s3_backend.store, s3_backend.injector
    assert injector is not None
    v1 = await store.put(make_checkpoint(writer="a"), expected_version=None)
    await store.put(make_checkpoint(writer="b"), expected_version=v1)
    injector.arm(409, "ConditionalRequestConflict", count=1, operations={"PutObject"})
    with pytest.raises(CheckpointFenced):
        await store.put(make_checkpoint(writer="a", partial_text="late"), expected_version=v1)
    stored = await store.get("run-1")
    assert stored is not None and stored.checkpoint.writer == "b"


async def test_s3_conflicts_beyond_the_retry_budget_surface_as_store_error(
    s3_backend: Backend,
) -> None:
    store, injector = s3_backend.store, s3_backend.injector
    assert injector is not None
    injector.arm(409, "ConditionalRequestConflict", count=100, operations={"PutObject"})
    with pytest.raises(StreamCheckpointError) as caught:
        await store.put(make_checkpoint(), expected_version=None)
    assert not isinstance(caught.value, CheckpointFenced)
    assert isinstance(caught.value.__cause__, ClientError)
    budget = 1 + store.conflict_retries  # type: ignore[attr-defined]
    assert injector.injected == budget


async def test_s3_delete_conflict_409_is_retried(s3_backend: Backend) -> None:
    store, injector = s3_backend.store, s3_backend.injector
    assert injector is not None
    version = await store.put(make_checkpoint(), expected_version=None)
    injector.arm(409, "ConditionalRequestConflict", count=1, operations={"DeleteObject"})
    await store.delete("run-1", expected_version=version)
    assert injector.injected == 1
    assert await store.get("run-1") is None


class LandThenFail:
    """Applies the next PutObject out of band, then answers 500 as if the reply was lost.

    botocore retries the 500; the retry finds the condition already consumed.
    ``write`` is the body that lands: the writer's own, or a rival's.
    """

    def __init__(self, client: Any, bucket: str, key: str, write: bytes, condition: str) -> None:
        self.client, self.bucket, self.key, self.write = client, bucket, key, write
        self.condition = condition
        self.armed = True

    async def __call__(self, request: Any, event_name: str, **_: Any) -> Any:
        if not self.armed or not event_name.endswith(".PutObject"):
            return None
        self.armed = False
        await self.client.put_object(
            Bucket=self.bucket, Key=self.key, Body=self.write, IfMatch=self.condition
        )
        return error_response(request.url, 500, "InternalError")


async def test_s3_own_write_whose_reply_was_lost_is_not_mistaken_for_a_fence(
    s3_backend: Backend,
) -> None:
    store: Any = s3_backend.store
    version = await store.put(make_checkpoint(partial_text="a"), expected_version=None)
    mine = make_checkpoint(partial_text="ab")
    # The side channel must not pass through the hook it is called from.
    async with s3_client(s3_backend.endpoint) as side:
        hook = LandThenFail(
            side, store.bucket, store.key_for("run-1"), encode_checkpoint(mine), version
        )
        s3_backend.client.meta.events.register_first("before-send.s3", hook)
        new_version = await store.put(mine, expected_version=version)
        s3_backend.client.meta.events.unregister("before-send.s3", hook)
    assert not hook.armed
    stored = await store.get("run-1")
    assert stored is not None
    assert (stored.checkpoint, stored.version) == (mine, new_version)
    # The returned version is usable: the writer carries on.
    await store.put(make_checkpoint(partial_text="abc"), expected_version=new_version)


async def test_s3_rival_write_during_a_retried_put_is_still_fenced(s3_backend: Backend) -> None:
    store: Any = s3_backend.store
    version = await store.put(make_checkpoint(partial_text="a"), expected_version=None)
    rival = make_checkpoint(writer="rival", epoch=9, partial_text="theirs")
    async with s3_client(s3_backend.endpoint) as side:
        hook = LandThenFail(
            side, store.bucket, store.key_for("run-1"), encode_checkpoint(rival), version
        )
        s3_backend.client.meta.events.register_first("before-send.s3", hook)
        with pytest.raises(CheckpointFenced):
            await store.put(make_checkpoint(partial_text="mine"), expected_version=version)
        s3_backend.client.meta.events.unregister("before-send.s3", hook)
    stored = await store.get("run-1")
    assert stored is not None and stored.checkpoint == rival
