"""The TypeScript client's protocol types cannot drift from the server's definitions.

``clients/typescript/src/protocol.generated.ts`` is written by ``tests.clients.ts_protocol``
from the frame builders, the socket handler's own frames, the routes, the request models and
the response views. This test writes it again and compares: a field added, renamed or dropped
on the Python side fails here until the file is regenerated (and the client compiled against
it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from awaken_s3.messages import ToolUseBlock
from awaken_s3.service import frames, http_models
from tests.clients import followed_fixture, ts_protocol

REGENERATE = ".venv/bin/python -m tests.clients.ts_protocol > " + str(
    ts_protocol.GENERATED.relative_to(ts_protocol.ROOT)
)


def test_the_generated_typescript_is_current() -> None:
    assert ts_protocol.GENERATED.read_text() == ts_protocol.render(), (
        f"the TypeScript protocol types drifted from the server's: run {REGENERATE}"
    )


def test_a_field_added_to_a_frame_changes_the_types(monkeypatch: pytest.MonkeyPatch) -> None:
    before = ts_protocol.render()
    real = frames.text_frame

    def with_field(run_id: str, turn: int, offset: int, text: str) -> frames.Frame:
        return {**real(run_id, turn, offset, text), "turn": turn, "index": 0}

    monkeypatch.setattr(frames, "text_frame", with_field)
    after = ts_protocol.render()
    assert after != before
    assert "export interface TextFrame {" in after
    text_interface = after.split("export interface TextFrame {")[1].split("}")[0]
    assert "  index: number;" in text_interface


def test_a_field_with_no_known_type_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    real = frames.resumed_frame

    def with_new(run_id: str, turn: int, plan: str, retry_count: int) -> frames.Frame:
        return {**real(run_id, turn, plan, retry_count), "worker_epoch": 3}

    monkeypatch.setattr(frames, "resumed_frame", with_new)
    with pytest.raises(KeyError, match="worker_epoch"):
        ts_protocol.render()


def test_a_renamed_view_field_changes_the_types(monkeypatch: pytest.MonkeyPatch) -> None:
    before = ts_protocol.render()
    real = http_models.run_view

    def renamed(run: Any) -> dict[str, Any]:
        view = real(run)
        view["state"] = view.pop("status")
        return view

    monkeypatch.setattr(ts_protocol, "run_view", renamed)
    with pytest.raises(KeyError, match="state"):
        ts_protocol.render()
    monkeypatch.setattr(ts_protocol, "FIELD_TYPES", {**ts_protocol.FIELD_TYPES, "state": "X"})
    assert ts_protocol.render() != before


def test_the_socket_handlers_inline_frames_are_read_from_its_source() -> None:
    source = 'x = {"type": "following", "run_id": p, "turn": 1, "offset": 2, "extra": 3}'
    assert ts_protocol.inline_frames(source) == {
        "following": ["type", "run_id", "turn", "offset", "extra"]
    }
    kinds = ts_protocol.frame_fields()
    assert kinds["following"] == ["type", "run_id", "turn", "offset"]
    assert kinds["cancel"] == ["type", "run_id", "status"]


def test_every_frame_the_docs_list_has_a_type() -> None:
    """The frame table of docs/HANDLERS.md and the generated union name the same kinds."""
    docs = (ts_protocol.ROOT / "docs" / "HANDLERS.md").read_text()
    table = docs.split("**Server frames**")[1].split("**Offsets**")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    documented = {row.split("`")[1] for row in rows} - {"type"}  # the header row
    assert documented == set(ts_protocol.frame_fields())


def test_a_sample_tool_call_frame_is_what_the_interface_says() -> None:
    call = ToolUseBlock(id="c", name="n", input={"b": 1, "a": "é"})
    text = frames.input_json(call)
    frame = frames.tool_call_frame("r", 2, 1, call, 0, text, len(text))
    assert list(frame) == ts_protocol.frame_fields()["tool_call"]
    assert json.loads(frame["input_json"]) == {"a": "é", "b": 1}


def test_the_assembly_fixture_is_current() -> None:
    """The Node test compares the TypeScript assembly with what Python's FollowedText holds
    for the frames in this file; both must come from today's server code."""
    assert followed_fixture.FIXTURE.read_text() == followed_fixture.render(), (
        "the frame fixture drifted: run .venv/bin/python -m tests.clients.followed_fixture > "
        + str(followed_fixture.FIXTURE.relative_to(followed_fixture.ROOT))
    )
