"""ScriptedProvider: the faults it replays are the ones the runner must survive."""

from __future__ import annotations

import asyncio

import pytest

from awaken_s3.streaming import errors as e
from awaken_s3.streaming.events import StreamEvent, TextDelta, ToolCallDelta, ToolCallStart
from awaken_s3.streaming.provider import Provider
from awaken_s3.streaming.scripted import (
    Drop,
    Fail,
    ScriptedProvider,
    ScriptsExhausted,
    ScriptStep,
    Stall,
    interleave,
    text_turn,
    tool_call,
)

from .conftest import REQUEST


async def collect(provider: ScriptedProvider) -> list[StreamEvent]:
    return [event async for event in provider.stream(REQUEST)]


async def test_replays_one_script_per_call_and_records_requests() -> None:
    provider = ScriptedProvider([text_turn("ab", chunk=1), text_turn("c")], prefill=False)
    assert isinstance(provider, Provider)
    assert not provider.capabilities("any").assistant_prefill
    first = await collect(provider)
    assert [ev.text for ev in first if isinstance(ev, TextDelta)] == ["a", "b"]
    await collect(provider)
    assert provider.requests == [REQUEST, REQUEST]
    with pytest.raises(ScriptsExhausted):
        provider.stream(REQUEST)


async def test_a_drop_raises_after_the_events_before_it() -> None:
    provider = ScriptedProvider([[TextDelta("a"), TextDelta("b"), Drop()]])
    seen: list[StreamEvent] = []
    with pytest.raises(e.ConnectionDropped):
        async for event in provider.stream(REQUEST):
            seen.append(event)
    assert seen == [TextDelta("a"), TextDelta("b")]


@pytest.mark.parametrize(
    "error",
    [e.ServerError("503"), e.Throttled("429", retry_after=12.0), e.AuthenticationFailed("401")],
)
async def test_a_fail_step_raises_the_given_error_before_or_mid_stream(
    error: e.ProviderError,
) -> None:
    scripts: list[list[ScriptStep]] = [[Fail(error)], [TextDelta("x"), Fail(error)]]
    for script in scripts:
        with pytest.raises(type(error)) as raised:
            await collect(ScriptedProvider([script]))
        assert raised.value.retry_after == error.retry_after


async def test_a_stall_waits_until_the_consumer_gives_up() -> None:
    provider = ScriptedProvider([[TextDelta("a"), Stall(), TextDelta("never")]])
    iterator = provider.stream(REQUEST)
    assert await anext(iterator) == TextDelta("a")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await anext(iterator)
    await iterator.aclose()  # type: ignore[attr-defined]


def test_parallel_tool_calls_interleave_their_fragments() -> None:
    events = interleave(tool_call(0, "a", {"k": 1}, chunk=2), tool_call(1, "b", "{", close=False))
    assert events[:2] == [ToolCallStart(0, "call_0", "a"), ToolCallStart(1, "call_1", "b")]
    assert ToolCallDelta(1, "{") in events
