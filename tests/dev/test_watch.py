"""`awaken-s3 runs watch`: how the watcher folds the partial view's answers (pure), and its
errors when the API cannot be followed."""

from __future__ import annotations

import io
from typing import Any

import pytest

from awaken_s3.dev.watch import Api, RunWatch, WatchError, committed_text, watch_run


def view(status: str = "running", **partial: Any) -> dict[str, Any]:
    return {
        "run_id": "r1",
        "status": status,
        "turn": 0,
        "message_count": 1,
        "partial": ({"resumed_with": None, "version": "v", "tool_calls": []} | partial)
        if partial
        else None,
    }


def test_new_text_is_appended_and_asked_for_by_offset() -> None:
    watch = RunWatch("r1")
    assert watch.query() == {}
    watch.apply(view(turn=0, offset=0, text="Hello"))
    assert (watch.text, watch.query()) == ("Hello", {"turn": "0", "after": "5"})
    watch.apply(view(turn=0, offset=5, text=", world", resumed_with="R1"))
    assert (watch.text, watch.resumed_with, watch.replaced) == ("Hello, world", "R1", 0)


def test_a_new_turn_starts_its_text_afresh() -> None:
    watch = RunWatch("r1")
    watch.apply(view(turn=0, offset=0, text="first turn"))
    watch.apply(view(turn=1, offset=0, text="second"))
    assert (watch.text_turn, watch.text) == (1, "second")


def test_text_the_api_replaced_is_replaced_and_counted() -> None:
    # R4 after whitespace-only text: the API answers offset 0 with the new text.
    watch = RunWatch("r1")
    watch.apply(view(turn=0, offset=0, text="  "))
    watch.apply(view(turn=0, offset=0, text="Fresh"))
    assert (watch.text, watch.replaced) == ("Fresh", 1)


def test_an_ended_run_without_partial_keeps_the_last_text() -> None:
    watch = RunWatch("r1")
    watch.apply(view(turn=0, offset=0, text="Hello"))
    watch.apply(view("completed"))
    assert watch.ended and watch.text == "Hello"


def test_each_answer_says_what_changed_in_one_line_per_change() -> None:
    watch = RunWatch("r1")
    assert watch.apply(view("queued")) == ["status: queued (turn 0, 1 messages committed)"]
    assert watch.apply(view("queued")) == []  # nothing new, nothing said
    assert watch.apply(view(turn=0, offset=0, text='say "hi"\n')) == [
        "status: running (turn 0, 1 messages committed)",
        'text: "say \\"hi\\"\\n"',  # a JSON string: one line, whatever the text holds
    ]
    call = {"index": 1, "id": "toolu_1", "name": "lookup", "arguments": '{"to', "complete": False}
    assert watch.apply(view(turn=0, offset=9, text="", tool_calls=[call])) == [
        "tool call toolu_1 lookup: streaming"
    ]
    more = {**call, "arguments": '{"topic"', "complete": False}
    assert watch.apply(view(turn=0, offset=9, text="", tool_calls=[more])) == []
    done = {**call, "arguments": '{"topic": "s3"}', "complete": True}
    assert watch.apply(view(turn=0, offset=9, text="", tool_calls=[done], resumed_with="R2")) == [
        "resumed with R2 (turn 0)",
        'tool call toolu_1 lookup: complete {"topic": "s3"}',
    ]
    assert watch.apply(view(turn=0, offset=0, text="new")) == ['text replaced from offset 0: "new"']


def test_a_failed_run_s_error_is_said_once() -> None:
    watch = RunWatch("r1")
    error = {"code": "provider_unreachable", "message": "the service could not connect"}
    assert watch.apply(view("failed") | {"error": error}) == [
        "status: failed (turn 0, 1 messages committed)",
        "error: provider_unreachable: the service could not connect",
    ]
    assert watch.apply(view("failed") | {"error": error}) == []
    assert watch.error == error


def _said(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


THREAD = [
    _said("user", "one"),
    _said("assistant", "the first run's answer"),
    _said("user", "two"),
    _said("assistant", "the second run's answer"),
    _said("user", "three"),
    _said("assistant", "a later run's answer"),
]


def test_the_committed_turn_is_only_one_this_run_committed() -> None:
    # A run that committed no model turn has none, whatever the thread's last message is.
    assert committed_text({"turn": 0, "message_count": 5}, THREAD) is None
    # The run's last turn, not a later run's past the run's own message count.
    assert committed_text({"turn": 1, "message_count": 4}, THREAD) == "the second run's answer"
    assert committed_text({"turn": 1, "message_count": 6}, THREAD) == "a later run's answer"


@pytest.mark.parametrize("url", ["not-a-url", "127.0.0.1:8787", "ftp://x"])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(WatchError, match="must start with http"):
        Api(url)


def test_an_api_that_does_not_answer_is_named() -> None:
    from awaken_s3.local.ports import free_port

    api = Api(f"http://127.0.0.1:{free_port()}", timeout=5)
    with pytest.raises(WatchError, match=r"cannot reach the API at http://127\.0\.0\.1:\d+"):
        api.get("/runs/r1")


class ScriptedApi(Api):
    """The API's answers, in order: the partial views, then the run and its thread."""

    def __init__(self, views: list[dict[str, Any]], run: dict[str, Any], thread: list[Any]):
        super().__init__("http://127.0.0.1:1")
        self.views, self.run, self.thread = views, run, thread

    def get(
        self, path: str, *, query: dict[str, str] | None = None, etag: str | None = None
    ) -> tuple[int, dict[str, str], Any]:
        if path.endswith("/partial"):
            return 200, {"ETag": f'"{len(self.views)}"'}, self.views.pop(0)
        if path.startswith("/runs/"):
            return 200, {}, self.run
        return 200, {}, {"messages": self.thread}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


FAILED = {
    "thread_id": "t1",
    "status": "failed",
    "turn": 0,
    "message_count": 5,
    "error": {"code": "provider_unreachable", "message": "the service could not connect"},
}


@pytest.mark.parametrize("out", [io.StringIO(), Terminal()], ids=["pipe", "terminal"])
def test_a_run_that_failed_before_any_turn_ends_with_its_error_and_no_turn(
    out: io.StringIO,
) -> None:
    api = ScriptedApi(
        [view("running"), view("failed") | {"error": FAILED["error"]}], FAILED, THREAD[:5]
    )
    assert watch_run(api, "r2", interval=0.01, out=out, sleep=lambda _: None) == 1
    shown = out.getvalue()
    assert "no turn committed by this run" in shown
    assert "run r2 failed: provider_unreachable: the service could not connect" in shown
    assert "answer" not in shown  # nothing of the thread's earlier runs
