"""The partial view's pure decisions: which checkpoint is a run's live partial, offsets, the
view's version and If-None-Match (awaken_s3.service.partial)."""

from __future__ import annotations

import pytest

from awaken_s3.models import PartialToolCall, StoredCheckpoint, StreamCheckpoint
from awaken_s3.service.partial import (
    InvalidQuery,
    etag_matches,
    live_partial,
    parse_offset,
    partial_view,
    text_offset,
    view_etag,
)
from awaken_s3.threads.models import RunState, RunStatus
from tests.fixtures import runs as fixtures


def run_state(status: RunStatus = RunStatus.RUNNING, turn: int = 0, count: int = 1) -> RunState:
    return fixtures.run_state(status=status, turn=turn, message_count=count)


def stored(
    text: str = "Hello", *, turn: int = 0, version: str = '"v1"', thread: str = "t1"
) -> StoredCheckpoint:
    checkpoint = StreamCheckpoint(
        run_id="r1",
        thread_id=thread,
        model="m",
        turn=turn,
        partial_text=text,
        tool_calls=(PartialToolCall(index=1, id="c1", name="search", arguments='{"q": "s'),),
        resumed_with="R1",
    )
    return StoredCheckpoint(checkpoint=checkpoint, version=version)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, None), ("", None), ("0", 0), ("17", 17), (str(2**31 - 1), 2**31 - 1)],
)
def test_offsets_parse(raw: str | None, expected: int | None) -> None:
    assert parse_offset(raw, name="after") == expected


@pytest.mark.parametrize("raw", ["-1", "1.5", "x", " 3", "٣", str(2**31), "9" * 40])
def test_offsets_that_are_not_whole_numbers_in_range_are_refused(raw: str) -> None:
    with pytest.raises(InvalidQuery, match="after"):
        parse_offset(raw, name="after")


@pytest.mark.parametrize(
    ("length", "after", "same_turn", "offset"),
    [
        (10, None, True, 0),  # no offset: the whole text
        (10, 4, True, 4),  # the text after what the caller has
        (10, 10, True, 10),  # nothing new
        (10, 11, True, 0),  # the caller holds more than there is: the whole text again
        (10, 4, False, 0),  # the caller's offset belongs to another turn
    ],
)
def test_text_offset(length: int, after: int | None, same_turn: bool, offset: int) -> None:
    assert text_offset(length, after=after, same_turn=same_turn) == offset


def test_partial_view_returns_only_new_text_of_the_same_turn() -> None:
    view = partial_view(stored("Hello, world"), after=5, turn=0)
    assert (view["offset"], view["text"], view["text_length"]) == (5, ", world", 12)
    assert view["version"] == "v1" and view["resumed_with"] == "R1"
    assert view["tool_calls"] == [
        {"index": 1, "id": "c1", "name": "search", "arguments": '{"q": "s', "complete": False}
    ]
    other_turn = partial_view(stored("Hello, world"), after=5, turn=3)
    assert (other_turn["offset"], other_turn["text"]) == (0, "Hello, world")


@pytest.mark.parametrize(
    ("run", "checkpoint", "shown"),
    [
        (run_state(), stored(), True),
        (run_state(RunStatus.QUEUED), stored(), True),
        (run_state(RunStatus.SUSPENDED), stored(), True),
        # a leftover of a committed turn: the thread already has that turn
        (run_state(turn=1), stored(turn=0), False),
        (run_state(RunStatus.COMPLETED), stored(), False),
        (run_state(RunStatus.FAILED), stored(), False),
        (run_state(), stored(thread="t2"), False),
        (run_state(), None, False),
    ],
)
def test_which_checkpoint_is_the_live_partial(
    run: RunState, checkpoint: StoredCheckpoint | None, shown: bool
) -> None:
    assert (live_partial(run, checkpoint) is not None) is shown


def test_the_view_version_moves_with_the_checkpoint_and_the_run() -> None:
    base = view_etag(run_state(), stored())
    assert base == view_etag(run_state(), stored())
    changed = [
        view_etag(run_state(), stored(version='"v2"')),
        view_etag(run_state(), None),
        view_etag(run_state(RunStatus.COMPLETED), stored()),
        view_etag(run_state(turn=1), stored()),
        view_etag(run_state(count=3), stored()),
    ]
    assert base not in changed and len(set(changed)) == len(changed)
    assert base.startswith('"') and base.endswith('"')


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ("", False),
        ('"abc"', True),
        ('W/"abc"', True),
        ('"x", "abc"', True),
        ('"x",W/"abc"', True),
        ("*", True),
        ('"abcd"', False),
        ("abc", False),
    ],
)
def test_if_none_match(header: str | None, matches: bool) -> None:
    assert etag_matches(header, '"abc"') is matches
