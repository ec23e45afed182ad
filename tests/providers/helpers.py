"""Shared helpers of the provider tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.streaming.errors import ProviderError
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.provider import ModelRequest, Provider, ProviderCapabilities, ToolSpec
from tests.fixtures.clock import FakeClock

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def simple_request(model: str, *, prefill: str | None = None) -> ModelRequest:
    messages = [Message.user("What is the weather in Paris and Oslo?")]
    if prefill is not None:
        messages.append(Message.assistant(prefill))
    return ModelRequest(model=model, messages=messages, system="Be brief.", tools=(WEATHER,))


def tool_history_request(model: str) -> ModelRequest:
    """A conversation that already holds a tool call and its result."""
    return ModelRequest(
        model=model,
        messages=[
            Message.user("Weather in Paris?"),
            Message(
                role="assistant",
                content=(
                    TextBlock(text="Checking."),
                    ToolUseBlock(id="call_1", name="get_weather", input={"city": "Paris"}),
                ),
            ),
            Message(
                role="user",
                content=(ToolResultBlock(tool_use_id="call_1", content="18C, cloudy"),),
            ),
        ],
        tools=(WEATHER,),
    )


async def collect(
    provider: Provider, request: ModelRequest
) -> tuple[list[StreamEvent], ProviderError | None]:
    """Every event the provider yielded, and the typed error that ended the stream, if any."""
    events: list[StreamEvent] = []
    try:
        async for event in provider.stream(request):
            events.append(event)
    except ProviderError as exc:
        return events, exc
    return events, None


class DeadlineBefore:
    """``inner``, with ``clock`` moved past any deadline just before the first event ``cut``
    picks reaches the runner: the turn is cut right after that event, however long the wire
    took to deliver it (give the runner the same ``clock``)."""

    def __init__(
        self, inner: Provider, clock: FakeClock, cut: Callable[[StreamEvent], bool]
    ) -> None:
        self.inner, self.clock, self.cut = inner, clock, cut
        self.name = inner.name

    def capabilities(self, model: str) -> ProviderCapabilities:
        return self.inner.capabilities(model)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self._events(request)

    async def _events(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        events = aiter(self.inner.stream(request))
        try:
            async for event in events:
                if self.cut(event):
                    self.clock.advance(86_400)
                yield event
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
