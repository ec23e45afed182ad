"""A framework's finished turn never answers its next request, and a checkpoint answers only
the request it was written for.

Real Pydantic AI and Strands agents, their models wrapped in ``ResumableModel``, against the
local wire servers (the real provider SDKs, the providers' real stream formats), in process:
a run is cut by cancelling it once its checkpoint holds what the test waited for (the turn
then stops as a crash would, its checkpoint kept)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from awaken_s3 import CheckpointPolicy, Message, ModelRequest
from awaken_s3.integrations import checkpoint_key
from awaken_s3.integrations._turns import request_digest
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
from tests.integrations.test_resume_after_kill import messages
from tests.providers.wire.dialects import API_KEY, Dialect, by_name
from tests.providers.wire.server import STALL, WireServer

pytest.importorskip("pydantic_ai")
pytest.importorskip("strands")

from pydantic_ai import Agent, BinaryContent
from pydantic_ai.models import Model

from awaken_s3.integrations import pydantic_ai as pai_adapter
from awaken_s3.integrations import strands as strands_adapter

KEY = checkpoint_key("conversation-7", "run-1")
#: checkpoint every delta, so a cut lands right after what the test waited for
EAGER = CheckpointPolicy(min_interval=0.0, min_bytes=0)
DIALECTS = ["anthropic", "openai"]
#: a bound only a hung test reaches (the waits are on the checkpoint, not on time)
BOUND = 60.0


class Weather(BaseModel):
    city: str
    celsius: int


@pytest.fixture
async def wire() -> AsyncIterator[WireServer]:
    server = WireServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def pydantic_model(d: Dialect, wire: WireServer) -> Model:
    if d.name == "anthropic":
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        client = AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
        return AnthropicModel(d.model, provider=AnthropicProvider(anthropic_client=client))
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    gpt = AsyncOpenAI(api_key=API_KEY, base_url=wire.url + "/v1", max_retries=0)
    return OpenAIChatModel(d.model, provider=OpenAIProvider(openai_client=gpt))


def strands_model(d: Dialect, wire: WireServer, **config: Any) -> Any:
    if d.name == "anthropic":
        from strands.models.anthropic import AnthropicModel

        client_args = {"api_key": API_KEY, "base_url": wire.url, "max_retries": 0}
        return AnthropicModel(client_args=client_args, model_id=d.model, **config)
    from strands.models.openai import OpenAIModel

    client_args = {"api_key": API_KEY, "base_url": wire.url + "/v1", "max_retries": 0}
    return OpenAIModel(client_args=client_args, model_id=d.model, **config)


def resumable(store: InMemoryStreamCheckpointStore, inner: Model) -> pai_adapter.ResumableModel:
    return pai_adapter.ResumableModel(inner, store=store, key=KEY, checkpoint_policy=EAGER)


def tool_turn(
    d: Dialect, call_id: str, name: str, arguments: dict[str, Any], text: str = ""
) -> Any:
    call = [(call_id, name, [json.dumps(arguments)], True)]
    if not text:
        return d.stream(d.start(), d.tools(call, first_block=0), d.end("tool_use"))
    return d.stream(d.start(), d.text([text]), d.tools(call, first_block=1), d.end("tool_use"))


async def cut_when_saved(
    run: Coroutine[Any, Any, Any], store: InMemoryStreamCheckpointStore, text: str
) -> None:
    """Run ``run`` until the checkpoint under KEY holds ``text``, then cancel it: the turn
    stops as a crash stops it, its checkpoint kept."""
    task = asyncio.ensure_future(run)
    try:
        async with asyncio.timeout(BOUND):
            while True:
                stored = await store.get(KEY)
                if stored is not None and stored.checkpoint.partial_text == text:
                    break
                if task.done():
                    raise AssertionError(f"the run ended before the cut: {task.result()!r}")
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- a turn ends once ----------------------------------------------------------------------


@pytest.mark.parametrize("dialect_name", DIALECTS)
async def test_pydantic_ai_structured_output_twice_under_one_key_each_run_gets_its_own_answer(
    dialect_name: str, wire: WireServer
) -> None:
    d = by_name(dialect_name)
    store = InMemoryStreamCheckpointStore()
    agent = Agent(resumable(store, pydantic_model(d, wire)), output_type=Weather)

    answers = []
    for n, celsius in enumerate([18, 25]):
        wire.push(tool_turn(d, f"call_{n}", "final_result", {"city": "Paris", "celsius": celsius}))
        answers.append((await agent.run("What is the weather in Paris?")).output)
        # The output tool call ended the turn: nothing is left to answer the next request.
        assert await store.get(KEY) is None

    assert answers == [Weather(city="Paris", celsius=18), Weather(city="Paris", celsius=25)]
    assert len(wire.received) == 2  # the second run asked the model


@pytest.mark.parametrize("dialect_name", DIALECTS)
async def test_pydantic_ai_run_stream_of_text_and_a_tool_call_twice_runs_the_tool_once_per_run(
    dialect_name: str, wire: WireServer
) -> None:
    d = by_name(dialect_name)
    store = InMemoryStreamCheckpointStore()
    agent = Agent(resumable(store, pydantic_model(d, wire)))
    tool_runs: list[str] = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        tool_runs.append(city)
        return f"18C in {city}"

    outputs = []
    for n, city in enumerate(["Paris", "Lyon"]):
        wire.push(tool_turn(d, f"call_{n}", "get_weather", {"city": city}, f"Checking {city}. "))
        async with agent.run_stream("What is the weather?") as streamed:
            outputs.append((await streamed.get_output()).strip())
        assert await store.get(KEY) is None

    # run_stream takes the text as the output; each run's own reply, its own tool run.
    assert outputs == ["Checking Paris.", "Checking Lyon."]
    assert tool_runs == ["Paris", "Lyon"]
    assert len(wire.received) == 2


@pytest.mark.parametrize("dialect_name", DIALECTS)
async def test_strands_structured_output_twice_under_one_key_each_run_gets_its_own_answer(
    dialect_name: str, wire: WireServer
) -> None:
    from strands import Agent as StrandsAgent

    d = by_name(dialect_name)
    store = InMemoryStreamCheckpointStore()
    inner = strands_model(d, wire, **({"max_tokens": 1024} if d.name == "anthropic" else {}))
    model = strands_adapter.ResumableModel(inner, store=store, key=KEY, checkpoint_policy=EAGER)
    agent = StrandsAgent(model=model, callback_handler=None)

    answers = []
    for n, celsius in enumerate([18, 25]):
        wire.push(tool_turn(d, f"call_{n}", "Weather", {"city": "Paris", "celsius": celsius}))
        result = await agent.invoke_async(
            "What is the weather in Paris?", structured_output_model=Weather
        )
        answers.append(result.structured_output)
        assert await store.get(KEY) is None
        agent.messages.clear()  # the same request again

    assert answers == [Weather(city="Paris", celsius=18), Weather(city="Paris", celsius=25)]
    assert len(wire.received) == 2


# -- a checkpoint is bound to its request ----------------------------------------------------

PREFIX = "The weather in Paris is "
PARIS = "What is the weather in Paris?"


def photo(data: bytes) -> list[Any]:
    return [PARIS, BinaryContent(data=data, media_type="image/png")]


#: the request that was cut, and another one under the same key: (prompt, run keywords)
OTHER_REQUESTS: dict[str, tuple[tuple[Any, dict[str, Any]], tuple[Any, dict[str, Any]]]] = {
    "another prompt": ((PARIS, {}), ("What is the weather in Lyon?", {})),
    "another image": ((photo(b"\x89PNG-one"), {}), (photo(b"\x89PNG-two"), {})),
    "other settings": (
        (PARIS, {"model_settings": {"temperature": 0.0}}),
        (PARIS, {"model_settings": {"temperature": 1.0}}),
    ),
}


@pytest.mark.parametrize("change", list(OTHER_REQUESTS))
@pytest.mark.parametrize("dialect_name", DIALECTS)
async def test_pydantic_ai_another_request_under_the_key_starts_fresh_and_deletes_the_cut_one(
    change: str, dialect_name: str, wire: WireServer
) -> None:
    d = by_name(dialect_name)
    store = InMemoryStreamCheckpointStore()
    # The second run writes no checkpoint of its own: what is left under the key after it is
    # whatever the first run left, unless the second deleted it.
    quiet = CheckpointPolicy(min_interval=3600.0, min_bytes=1 << 20)
    (cut_prompt, cut_kwargs), (prompt, kwargs) = OTHER_REQUESTS[change]
    inner = pydantic_model(d, wire)
    wire.push(d.stream(d.start(), d.text(["The weather ", "in Paris is "]), [STALL]))
    await cut_when_saved(
        Agent(resumable(store, inner)).run(cut_prompt, **cut_kwargs), store, PREFIX
    )

    wire.push(d.text_turn(["Its own answer."]))
    model = pai_adapter.ResumableModel(inner, store=store, key=KEY, checkpoint_policy=quiet)
    result = await Agent(model).run(prompt, **kwargs)

    assert result.output == "Its own answer."  # not the cut turn's text, nor a continuation
    sent = messages(d, wire.received[1])
    assert sent[-1][0] == "user" and CONTINUE_INSTRUCTION not in sent[-1][1]
    assert all(role == "user" for role, _ in sent)
    assert await store.get(KEY) is None


@pytest.mark.parametrize("dialect_name", DIALECTS)
async def test_strands_another_model_configuration_under_the_key_starts_fresh(
    dialect_name: str, wire: WireServer
) -> None:
    from strands import Agent as StrandsAgent

    d = by_name(dialect_name)
    store = InMemoryStreamCheckpointStore()

    def agent(max_tokens: int, policy: CheckpointPolicy) -> Any:
        config: dict[str, Any] = (
            {"max_tokens": max_tokens}
            if d.name == "anthropic"
            else {"params": {"max_tokens": max_tokens}}
        )
        inner = strands_model(d, wire, **config)
        model = strands_adapter.ResumableModel(
            inner, store=store, key=KEY, checkpoint_policy=policy
        )
        return StrandsAgent(model=model, callback_handler=None)

    wire.push(d.stream(d.start(), d.text(["The weather ", "in Paris is "]), [STALL]))
    await cut_when_saved(agent(1024, EAGER).invoke_async(PARIS), store, PREFIX)

    wire.push(d.text_turn(["Its own answer."]))
    quiet = CheckpointPolicy(min_interval=3600.0, min_bytes=1 << 20)
    result = await agent(2048, quiet).invoke_async(PARIS)

    assert str(result).strip() == "Its own answer."
    sent = messages(d, wire.received[1])
    assert [role for role, _ in sent] == ["user"] and sent[0][1] == PARIS
    assert await store.get(KEY) is None


#: the same request again, though the transport settings changed: (cut run, rerun) keywords
SAME_REQUESTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "as it was": ({}, {}),
    "another timeout": (
        {"model_settings": {"timeout": 30.0}},
        {"model_settings": {"timeout": 90.0}},
    ),
}


@pytest.mark.parametrize("case", list(SAME_REQUESTS))
@pytest.mark.parametrize("dialect_name", DIALECTS)
async def test_pydantic_ai_the_same_request_under_the_key_resumes_the_cut_turn(
    case: str, dialect_name: str, wire: WireServer
) -> None:
    """The binding keeps what it is for: the request that was cut, made again, continues."""
    d = by_name(dialect_name)
    store = InMemoryStreamCheckpointStore()
    inner = pydantic_model(d, wire)
    cut_kwargs, kwargs = SAME_REQUESTS[case]
    wire.push(d.stream(d.start(), d.text(["The weather ", "in Paris is "]), [STALL]))
    await cut_when_saved(Agent(resumable(store, inner)).run(PARIS, **cut_kwargs), store, PREFIX)

    wire.push(d.text_turn(["18C."]))
    result = await Agent(resumable(store, inner)).run(PARIS, **kwargs)

    assert result.output == "The weather in Paris is 18C."
    assert messages(d, wire.received[1])[-2:] == [
        ("assistant", PREFIX.rstrip()),
        ("user", CONTINUE_INSTRUCTION),
    ]
    assert await store.get(KEY) is None


def test_the_request_digest_is_canonical_and_names_no_memory_address() -> None:
    request = ModelRequest("m", (Message.user("hi"),), system="be brief")

    class Opaque:
        pass

    class Forecast(BaseModel):
        city: str
        days: int

    def digest(**shape: object) -> str:
        return request_digest(request, shape)

    # An object JSON cannot hold counts by its type, never by its repr (an address that
    # differs in the rerun's process).
    assert digest(client=Opaque()) == digest(client=Opaque())
    assert digest(a=1, b=[1, 2]) == digest(b=[1, 2], a=1)
    assert digest(image=b"one") != digest(image=b"two")
    assert digest(output=Weather) != digest(output=Forecast)
    assert digest(temperature=0.0) != digest(temperature=1.0)
    assert len(digest()) == len("req-") + 64


def test_checkpoint_key_joins_valid_ids_and_digests_the_rest() -> None:
    assert checkpoint_key("conversation-7", 3) == "conversation-7-3"
    odd = checkpoint_key("user@example.com", "run/1")
    assert odd.startswith("user_example_com-run_1-") and odd != checkpoint_key(
        "user@example.com", "run.1"
    )
    assert len(checkpoint_key("x" * 300)) <= 128
    with pytest.raises(ValueError):
        checkpoint_key()


def test_a_message_file_round_trips_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    from pydantic_ai import messages as pai

    saved = pai_adapter.MessageFile(tmp_path / "c.json")
    assert saved.load() == (None, [])
    history: list[pai.ModelMessage] = [
        pai.ModelRequest(parts=[pai.UserPromptPart(content=PARIS)]),
        pai.ModelResponse(parts=[pai.ToolCallPart("get_weather", {"city": "Paris"}, "call_1")]),
    ]
    saved.save("run-1", history)
    run_id, loaded = saved.load()
    assert run_id == "run-1" and loaded == history
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no temporary file left

    (tmp_path / "c.json").write_text('{"run_id": "run-1", "messages": [{"kind": "nonsense"}]}')
    with pytest.raises(pai_adapter.SavedHistoryError):
        saved.load()
