"""Whether a create_run repeats an earlier one (pure): the request, not just the settings."""

from __future__ import annotations

import dataclasses

import pytest

from awaken_s3.messages import Message
from awaken_s3.threads.models import RunSettings, RunState
from awaken_s3.threads.rules import run_request_digest, same_run_request
from tests.fixtures.runs import run_state

SETTINGS = RunSettings(model="m", tools=("add",))
HELLO = run_request_digest(SETTINGS, [Message.user("hello")])


def stored(digest: str | None) -> RunState:
    return run_state(settings=SETTINGS, request_digest=digest)


@pytest.mark.parametrize(
    ("existing", "thread_id", "owner", "settings", "digest", "same"),
    [
        (HELLO, "t1", "alice", SETTINGS, HELLO, True),
        (
            HELLO,
            "t1",
            "alice",
            SETTINGS,
            run_request_digest(SETTINGS, [Message.user("bye")]),
            False,
        ),
        (HELLO, "t2", "alice", SETTINGS, HELLO, False),
        (HELLO, "t1", "bob", SETTINGS, HELLO, False),
        (HELLO, "t1", "alice", dataclasses.replace(SETTINGS, max_turns=3), HELLO, False),
        # A run stored before digests existed is compared as before: by its settings.
        (None, "t1", "alice", SETTINGS, HELLO, True),
    ],
)
def test_same_run_request(
    existing: str | None,
    thread_id: str,
    owner: str,
    settings: RunSettings,
    digest: str,
    same: bool,
) -> None:
    assert (
        same_run_request(
            stored(existing),
            thread_id=thread_id,
            owner=owner,
            settings=settings,
            request_digest=digest,
        )
        is same
    )


def test_the_digest_covers_every_setting_and_every_message_in_order() -> None:
    base = run_request_digest(SETTINGS, [Message.user("a"), Message.user("b")])
    assert base == run_request_digest(SETTINGS, [Message.user("a"), Message.user("b")])
    assert base != run_request_digest(SETTINGS, [Message.user("b"), Message.user("a")])
    assert base != run_request_digest(SETTINGS, [Message.user("ab")])
    for change in (
        {"model": "n"},
        {"system": "s"},
        {"max_tokens": 1},
        {"temperature": 0.0},
        {"tools": ()},
        {"max_turns": 1},
    ):
        changed = dataclasses.replace(SETTINGS, **change)
        assert run_request_digest(changed, [Message.user("a"), Message.user("b")]) != base
