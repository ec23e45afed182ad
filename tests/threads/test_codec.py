"""Items written to DynamoDB read back as the same records (pure, no AWS)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.streaming.outcome import ClassifiedError, Usage
from awaken_s3.threads import (
    Lease,
    RunSettings,
    RunState,
    RunStatus,
    Thread,
    ToolCallRecord,
    ToolCallStatus,
    codec,
)

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_objects = st.dictionaries(
    st.text(max_size=10),
    st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=5),
    max_size=4,
)
blocks = st.one_of(
    st.builds(TextBlock, text=st.text()),
    st.builds(ToolUseBlock, id=st.text(min_size=1), name=st.text(min_size=1), input=json_objects),
    st.builds(
        ToolResultBlock, tool_use_id=st.text(min_size=1), content=st.text(), is_error=st.booleans()
    ),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant"]),
    content=st.lists(blocks, max_size=4).map(tuple),
)


@given(message=messages, seq=st.integers(0, 10**9))
def test_message_items_round_trip(message: Message, seq: int) -> None:
    item = codec.message_item("t1", seq, message, commit_id="c", now=1.5, body=None, body_ref=None)
    for read in (item, codec.from_wire(codec.to_wire(item))):
        stored = codec.stored_message_of(read)
        assert (stored.message, stored.seq, stored.commit_id) == (message, seq, "c")


def test_sort_keys_order_like_sequence_numbers() -> None:
    seqs = [0, 1, 9, 10, 11, 99, 100, 12345, 10**9]
    assert sorted(seqs, key=codec.message_sk) == seqs
    assert codec.message_sk(42) == "MSG#0000000042"


def test_offloaded_message_item_has_a_reference_and_no_body() -> None:
    message = Message.assistant("big")
    item = codec.message_item("t1", 3, message, commit_id="c", now=1.0, body=None, body_ref="k")
    assert "body" not in item and codec.message_body_ref(item) == "k"
    assert codec.stored_message_of(item).message is None
    fetched = codec.stored_message_of(item, body=codec.encode_content(message).encode())
    assert fetched.message == message


def test_run_thread_and_tool_records_round_trip() -> None:
    run = RunState(
        run_id="r1",
        thread_id="t1",
        owner="alice",
        settings=RunSettings(
            model="m", system="s", max_tokens=9, temperature=0.5, tools=("a", "b"), max_turns=3
        ),
        status=RunStatus.FAILED,
        turn=4,
        message_count=9,
        usage=Usage(120, 80),
        error=ClassifiedError("context_overflow", "too long", False),
        stop_reason="tool_use",
        lease=Lease("w1", 12, 1_700_000_030.25),
        created_at=1_700_000_000.5,
        updated_at=1_700_000_010.75,
        request_digest="ab12",
    )
    released = run.with_(
        lease=Lease(None, 12, 0.0), error=None, stop_reason=None, request_digest=None
    )
    thread = Thread("t1", "alice", 3, 5.0, {"title": "x"})
    record = ToolCallRecord("r1", "call_9", "add", ToolCallStatus.FINISHED, 4, 2, "3", True)
    # As the memory store keeps them, and through DynamoDB's wire format and back.
    for state in (run, released):
        assert codec.run_of(codec.run_item(state)) == state
        assert codec.decode_run(codec.to_wire(codec.run_item(state))) == state
    assert codec.thread_of(codec.thread_item(thread)) == thread
    assert codec.decode_thread(codec.to_wire(codec.thread_item(thread))) == thread
    keyed = ToolCallRecord(
        "r1",
        "call_0",
        "add",
        ToolCallStatus.TIMED_OUT,
        4,
        3,
        turn=2,
        input_digest="d1",
        timeouts=2,
        adopted=True,
        legacy_key=True,
    )
    for tool_record in (record, keyed):
        assert codec.tool_of(codec.tool_item(tool_record)) == tool_record
        assert codec.decode_tool(codec.to_wire(codec.tool_item(tool_record))) == tool_record
    assert codec.tool_key("r1", "call_0", 2)["sk"] == "TOOL#0000000002#call_0"
    # An id is free text: a record is decoded from its attributes, never by parsing its key.
    odd = ToolCallRecord("r1", "7#x", "add", ToolCallStatus.CLAIMED, 1)
    assert codec.tool_of(codec.tool_item(odd)) == odd


def test_numbers_are_stored_as_dynamodb_keeps_them() -> None:
    # Fixed-point to the microsecond, never a float's exponent form.
    assert codec.to_wire({"t": codec.number(1e-7), "n": codec.number(3)}) == {
        "t": {"N": "0.000000"},
        "n": {"N": "3"},
    }
    assert codec.to_wire({"t": codec.number(1_700_000_000.25)}) == {"t": {"N": "1700000000.250000"}}
