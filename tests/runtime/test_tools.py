"""Tool registry (validation, sync/async, failures) and at-most-once execution records."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from awaken_s3.failures import FailureCode
from awaken_s3.messages import ToolUseBlock
from awaken_s3.runtime.tool_context import ToolContext, idempotency_key
from awaken_s3.runtime.tools import (
    MAX_TIMEOUTS,
    OUTCOME_UNKNOWN,
    REFUSED_LOG,
    CallSite,
    Tool,
    ToolError,
    ToolRegistry,
    ToolRunFailed,
    execute_tool_call,
    input_digest,
    refusal,
    tool,
    unserialisable,
)
from awaken_s3.threads import (
    InMemoryThreadStore,
    LeaseLost,
    ToolCallConflict,
    ToolCallRecord,
    ToolCallStatus,
    codec,
    writes,
)
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import seed_run
from tests.runtime.scripts import ADD_SCHEMA

CALL = ToolUseBlock(id="c1", name="add", input={"a": 2, "b": 3})
#: the run's turn counter when the call runs (one model turn committed)
TURN = 1
#: the tools the run under test enabled
ADD = ("add",)


def counting_registry(counter: list[int], *, idempotent: bool = False) -> ToolRegistry:
    def add(a: int, b: int) -> int:
        counter.append(a + b)
        return a + b

    return ToolRegistry([Tool("add", "Add.", ADD_SCHEMA, add, idempotent=idempotent)])


async def test_sync_tools_run_off_the_event_loop_and_async_tools_are_awaited() -> None:
    seen: list[str] = []
    loop_thread = threading.get_ident()
    registry = ToolRegistry()

    @registry.tool(input_schema={"type": "object"}, description="sync")
    def where() -> str:
        seen.append("off-loop" if threading.get_ident() != loop_thread else "on-loop")
        return "ok"

    @registry.tool(input_schema={"type": "object"})
    async def later() -> dict[str, int]:
        """Async tool."""
        await asyncio.sleep(0)
        return {"n": 1}

    assert (await registry.invoke(ToolUseBlock(id="1", name="where", input={}))).content == "ok"
    out = await registry.invoke(ToolUseBlock(id="2", name="later", input={}))
    assert (out.content, out.is_error) == ('{"n": 1}', False)
    assert seen == ["off-loop"]
    assert [s.description for s in registry.specs()] == ["sync", "Async tool."]


async def test_invalid_input_unknown_tool_and_exceptions_are_error_results() -> None:
    counter: list[int] = []
    registry = counting_registry(counter)
    bad = await registry.invoke(ToolUseBlock(id="1", name="add", input={"a": 1, "c": 2}))
    assert bad.is_error and "'b' is a required property" in bad.content
    assert "Additional properties are not allowed" in bad.content
    unknown = await registry.invoke(ToolUseBlock(id="2", name="mul", input={}))
    assert unknown.is_error and "unknown tool 'mul'" in unknown.content
    assert counter == []

    def boom(a: int, b: int) -> int:
        raise ValueError("no")

    registry.add(Tool("boom", "", ADD_SCHEMA, boom))
    out = await registry.invoke(ToolUseBlock(id="3", name="boom", input={"a": 1, "b": 2}))
    assert out.is_error and out.content == "tool 'boom' failed with an internal error"


async def test_slow_tool_times_out_and_long_output_is_cut() -> None:
    async def slow() -> str:
        await asyncio.Event().wait()
        return "never"

    registry = ToolRegistry([Tool("slow", "", {"type": "object"}, slow, timeout=0.01)])
    registry.max_result_chars = 10
    registry.add(Tool[[], str]("long", "", {"type": "object"}, lambda: "x" * 25))
    timed = await registry.invoke(ToolUseBlock(id="1", name="slow", input={}))
    assert timed.is_error and "timed out" in timed.content
    cut = await registry.invoke(ToolUseBlock(id="2", name="long", input={}))
    assert cut.content == "x" * 10 + "\n[... 15 more characters cut]"


def test_registry_refuses_bad_schemas_and_duplicates() -> None:
    with pytest.raises(ValueError, match="invalid input schema"):
        Tool[[], None]("t", "", {"type": "no-such-type"}, lambda: None)
    registry = counting_registry([])

    def first(a: int, b: int) -> int:
        return a

    with pytest.raises(ValueError, match="already registered"):
        registry.add(Tool("add", "", ADD_SCHEMA, first))
    with pytest.raises(KeyError):
        registry.specs(["add", "mul"])


@pytest.fixture
async def leased() -> tuple[InMemoryThreadStore, FakeClock, int]:
    clock = FakeClock()
    store = InMemoryThreadStore(clock=clock)
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=10)
    return store, clock, run.lease.epoch


async def test_a_call_runs_once_and_its_record_answers_repeats(
    leased: tuple[InMemoryThreadStore, FakeClock, int],
) -> None:
    store, _, epoch = leased
    counter: list[int] = []
    registry = counting_registry(counter)
    first = await execute_tool_call(
        store, registry, run_id="r1", turn=TURN, epoch=epoch, call=CALL, enabled=ADD
    )
    again = await execute_tool_call(
        store, registry, run_id="r1", turn=TURN, epoch=epoch, call=CALL, enabled=ADD
    )
    assert first == again and first.content == "5" and not first.is_error
    assert counter == [5]
    record = await store.get_tool_call("r1", "c1", turn=TURN)
    assert record is not None and record.status == ToolCallStatus.FINISHED


async def _orphan_claim(store: InMemoryThreadStore, clock: FakeClock, epoch: int) -> int:
    """A worker claimed c1 and died before recording a result; a new worker takes over."""
    await store.claim_tool_call(
        "r1", "c1", turn=TURN, name="add", input_digest=input_digest(CALL.input), epoch=epoch
    )
    clock.advance(11)
    return (await store.claim_run("r1", worker="w2", lease_seconds=10)).lease.epoch


async def test_claimed_without_result_is_unknown_for_non_idempotent_tools(
    leased: tuple[InMemoryThreadStore, FakeClock, int],
) -> None:
    store, clock, epoch = leased
    new_epoch = await _orphan_claim(store, clock, epoch)
    counter: list[int] = []
    result = await execute_tool_call(
        store,
        counting_registry(counter),
        run_id="r1",
        turn=TURN,
        epoch=new_epoch,
        call=CALL,
        enabled=ADD,
    )
    assert (result.content, result.is_error) == (OUTCOME_UNKNOWN, True)
    assert counter == []
    record = await store.get_tool_call("r1", "c1", turn=TURN)
    assert record is not None and record.status == ToolCallStatus.FINISHED and record.attempts == 2


async def test_claimed_without_result_is_rerun_for_idempotent_tools(
    leased: tuple[InMemoryThreadStore, FakeClock, int],
) -> None:
    store, clock, epoch = leased
    new_epoch = await _orphan_claim(store, clock, epoch)
    counter: list[int] = []
    registry = counting_registry(counter, idempotent=True)
    result = await execute_tool_call(
        store, registry, run_id="r1", turn=TURN, epoch=new_epoch, call=CALL, enabled=ADD
    )
    assert (result.content, result.is_error) == ("5", False)
    assert counter == [5]


async def test_a_fenced_worker_runs_nothing_and_cannot_record(
    leased: tuple[InMemoryThreadStore, FakeClock, int],
) -> None:
    store, clock, epoch = leased
    counter: list[int] = []
    registry = counting_registry(counter)
    new_epoch = await _orphan_claim(store, clock, epoch)
    with pytest.raises(LeaseLost):
        await execute_tool_call(
            store,
            registry,
            run_id="r1",
            turn=TURN,
            epoch=epoch,
            call=CALL.model_copy(update={"id": "c2"}),
            enabled=ADD,
        )
    assert counter == []
    # The old claimer, finishing late after a takeover, cannot overwrite the new record.
    await store.reclaim_tool_call("r1", "c1", turn=TURN, epoch=new_epoch, previous_epoch=epoch)
    with pytest.raises(ToolCallConflict):
        await store.finish_tool_call(
            "r1", "c1", turn=TURN, epoch=epoch, content="late", is_error=False
        )


@pytest.mark.parametrize(
    ("name", "enabled", "refused"),
    [
        ("add", ("add",), None),
        ("add", ("search", "add"), None),
        ("add", (), "tool 'add' is not enabled for this run"),
        ("delete_all", ("add",), "tool 'delete_all' is not enabled for this run"),
        ("Add", ("add",), "tool 'Add' is not enabled for this run"),
    ],
)
def test_a_run_may_call_only_the_tools_it_enabled(
    name: str, enabled: tuple[str, ...], refused: str | None
) -> None:
    assert refusal(name, enabled) == refused


async def test_a_registered_tool_the_run_did_not_enable_is_refused_without_a_claim(
    leased: tuple[InMemoryThreadStore, FakeClock, int], caplog: pytest.LogCaptureFixture
) -> None:
    store, _, epoch = leased
    counter: list[int] = []
    registry = counting_registry(counter)
    with caplog.at_level(logging.WARNING, logger="awaken_s3.tools"):
        result = await execute_tool_call(
            store, registry, run_id="r1", turn=TURN, epoch=epoch, call=CALL, enabled=("search",)
        )
    assert (result.tool_use_id, result.is_error) == ("c1", True)
    assert result.content == "tool 'add' is not enabled for this run"
    assert counter == []
    assert await store.get_tool_call("r1", "c1", turn=TURN) is None
    (logged,) = [r for r in caplog.records if r.getMessage() == REFUSED_LOG]
    assert (vars(logged)["run_id"], vars(logged)["tool"]) == ("r1", "add")


async def test_a_tool_s_exception_text_reaches_the_log_only_unless_it_is_a_tool_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def connect() -> str:
        raise ConnectionError("postgres://admin:hunter2@db.internal:5432 refused")

    def lookup(q: str) -> str:
        raise ToolError(f"no results for {q!r}; try a shorter query")

    registry = ToolRegistry(
        [
            Tool("connect", "", {"type": "object"}, connect),
            Tool("lookup", "", {"type": "object"}, lookup),
        ]
    )
    with caplog.at_level(logging.WARNING, logger="awaken_s3.tools"):
        hidden = await registry.invoke(ToolUseBlock(id="1", name="connect", input={}))
    assert (hidden.content, hidden.is_error) == (
        "tool 'connect' failed with an internal error",
        True,
    )
    assert "hunter2" in caplog.text  # the operator can still see what happened
    told = await registry.invoke(ToolUseBlock(id="2", name="lookup", input={"q": "xyz"}))
    assert told.is_error
    assert told.content == "tool 'lookup' failed: no results for 'xyz'; try a shorter query"


async def _legacy_claim(store: InMemoryThreadStore, clock: FakeClock, epoch: int) -> int:
    """A worker of the build before the turn was in the key claimed c1 (``TOOL#c1``) and
    was stopped by the upgrade; a worker of this build takes the run over."""
    legacy = ToolCallRecord("r1", "c1", "add", ToolCallStatus.CLAIMED, epoch)
    assert (await store._write(writes.new(codec.tool_item(legacy)), action="plant")).applied
    clock.advance(11)
    return (await store.claim_run("r1", worker="w2", lease_seconds=10)).lease.epoch


async def test_a_non_idempotent_call_claimed_before_the_upgrade_never_runs_again(
    leased: tuple[InMemoryThreadStore, FakeClock, int],
) -> None:
    store, clock, epoch = leased
    new_epoch = await _legacy_claim(store, clock, epoch)
    counter: list[int] = []
    registry = counting_registry(counter)
    for _ in range(2):  # and a redelivery after that
        result = await execute_tool_call(
            store, registry, run_id="r1", turn=TURN, epoch=new_epoch, call=CALL, enabled=ADD
        )
        assert (result.content, result.is_error) == (OUTCOME_UNKNOWN, True)
    assert counter == []


async def test_an_idempotent_call_claimed_before_the_upgrade_reruns_under_its_first_key(
    leased: tuple[InMemoryThreadStore, FakeClock, int],
) -> None:
    store, clock, epoch = leased
    new_epoch = await _legacy_claim(store, clock, epoch)
    seen: list[ToolContext] = []

    def add(a: int, b: int, ctx: ToolContext) -> int:
        seen.append(ctx)
        return a + b

    registry = ToolRegistry([tool(idempotent=True)(add)])
    result = await execute_tool_call(
        store,
        registry,
        run_id="r1",
        turn=TURN,
        epoch=new_epoch,
        call=CALL,
        enabled=ADD,
        site=CallSite(run_id="r1", thread_id="t1"),
    )
    assert (result.content, result.is_error) == ("5", False)
    [ctx] = seen
    # What its first attempt, before the upgrade, was given: the far end can deduplicate.
    assert ctx.idempotency_key == idempotency_key("r1", "c1", None)
    assert ctx.idempotency_key != idempotency_key("r1", "c1", TURN)
    assert ctx.attempt == 2


async def test_a_call_found_timed_out_as_often_as_allowed_fails_the_run_without_running(
    leased: tuple[InMemoryThreadStore, FakeClock, int],
) -> None:
    # Each attempt ran out of time and its worker died before failing the run: the next
    # worker reads the count in the record and fails the run, not running the call again.
    store, clock, epoch = leased
    digest = input_digest(CALL.input)
    await store.claim_tool_call("r1", "c1", turn=TURN, name="add", input_digest=digest, epoch=epoch)
    for attempt in range(MAX_TIMEOUTS):
        if attempt:
            clock.advance(11)
            new = (await store.claim_run("r1", worker=f"w{attempt}", lease_seconds=10)).lease.epoch
            await store.reclaim_tool_call("r1", "c1", turn=TURN, epoch=new, previous_epoch=epoch)
            epoch = new
        await store.time_out_tool_call("r1", "c1", turn=TURN, epoch=epoch)
    clock.advance(11)
    last = (await store.claim_run("r1", worker="w9", lease_seconds=10)).lease.epoch
    counter: list[int] = []
    with pytest.raises(ToolRunFailed) as failed:
        await execute_tool_call(
            store,
            counting_registry(counter, idempotent=True),
            run_id="r1",
            turn=TURN,
            epoch=last,
            call=CALL,
            enabled=ADD,
        )
    assert failed.value.error.code == FailureCode.TOOL_TIMED_OUT
    assert not failed.value.error.retryable
    assert counter == []


async def test_a_tool_error_text_utf8_cannot_hold_is_the_fixed_sentence() -> None:
    def lookup() -> str:
        raise ToolError("no match for \udcff")

    registry = ToolRegistry([Tool("lookup", "", {"type": "object"}, lookup)])
    out = await registry.invoke(ToolUseBlock(id="1", name="lookup", input={}))
    assert (out.content, out.is_error) == (unserialisable("lookup"), True)
