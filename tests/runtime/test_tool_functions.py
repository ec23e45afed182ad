"""``@tool``: schemas from type hints and docstrings, validation, the ToolContext, results."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from awaken_s3 import Tool, ToolContext, ToolError, tool
from awaken_s3.messages import ToolUseBlock
from awaken_s3.runtime.tool_schema import ToolDefinitionError
from awaken_s3.runtime.tools import CallSite, ToolRegistry, execute_tool_call
from awaken_s3.threads import InMemoryThreadStore
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import SETTINGS, seed_run


class Address(BaseModel):
    street: str
    city: str = "Paris"


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


@tool
def forecast(
    city: str,
    days: int = 3,
    unit: Unit = Unit.CELSIUS,
    detail: Literal["short", "long"] = "short",
    tags: list[str] | None = None,
) -> dict[str, Any]:
    """Get the weather forecast for a city.

    Uses the national weather service.

    Args:
        city: The city's name, as people write it.
        days: How many days ahead.
        unit: Temperature unit.
    """
    return {"city": city, "days": days, "unit": unit.value, "detail": detail, "tags": tags}


def test_the_schema_comes_from_the_type_hints_defaults_and_docstring() -> None:
    assert isinstance(forecast, Tool)
    assert forecast.name == "forecast"
    assert forecast.description == (
        "Get the weather forecast for a city.\n\nUses the national weather service."
    )
    schema = forecast.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["city"] == {
        "type": "string",
        "description": "The city's name, as people write it.",
    }
    assert props["days"] == {"type": "integer", "default": 3, "description": "How many days ahead."}
    assert props["detail"] == {"enum": ["short", "long"], "type": "string", "default": "short"}
    assert props["unit"]["default"] == "c" and props["unit"]["description"] == "Temperature unit."
    assert schema["$defs"]["Unit"]["enum"] == ["c", "f"]
    # pydantic's generated titles are noise for a model: none is left anywhere.
    assert not _titles(schema)


def _titles(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = ["title"] if isinstance(node.get("title"), str) else []
        for key, value in node.items():
            if key in ("properties", "$defs"):
                found += [t for sub in value.values() for t in _titles(sub)]
            else:
                found += _titles(value)
        return found
    if isinstance(node, list):
        return [t for item in node for t in _titles(item)]
    return []


def test_the_decorated_function_is_still_a_plain_function() -> None:
    assert forecast("Lyon", days=1)["days"] == 1
    assert forecast.func.__name__ == "forecast"


async def test_input_is_validated_and_coerced_the_way_the_hints_say() -> None:
    registry = ToolRegistry([forecast])
    ok = await registry.invoke(
        ToolUseBlock(id="1", name="forecast", input={"city": "Lyon", "days": "2", "unit": "f"})
    )
    assert not ok.is_error
    assert ok.content == (
        '{"city": "Lyon", "days": 2, "unit": "f", "detail": "short", "tags": null}'
    )
    bad = await registry.invoke(
        ToolUseBlock(id="2", name="forecast", input={"days": "soon", "colour": "red"})
    )
    assert bad.is_error
    assert bad.content.startswith("invalid input for tool 'forecast': ")
    # Every field at fault is named, so the model can fix them all at once.
    for part in ("city: Field required", "days: Input should be a valid integer", "colour"):
        assert part in bad.content


async def test_a_pydantic_model_argument_and_a_pydantic_model_result() -> None:
    @tool
    def geocode(address: Address, precise: bool = False) -> Address:
        """Normalise an address."""
        assert isinstance(address, Address)  # the tool gets the model, not a dict
        return Address(street=address.street.title(), city=address.city)

    schema = geocode.input_schema
    assert schema["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert schema["$defs"]["Address"]["required"] == ["street"]
    out = await ToolRegistry([geocode]).invoke(
        ToolUseBlock(id="1", name="geocode", input={"address": {"street": "rue de la paix"}})
    )
    assert (out.content, out.is_error) == ('{"street":"Rue De La Paix","city":"Paris"}', False)


async def test_results_may_be_text_json_data_or_dataclasses() -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    @tool
    async def point() -> Point:
        """A point."""
        return Point(1, 2)

    @tool
    def text() -> str:
        """Text as is."""
        return "as is"

    registry = ToolRegistry([point, text])
    assert (await registry.invoke(ToolUseBlock(id="1", name="point", input={}))).content == (
        '{"x": 1, "y": 2}'
    )
    assert (await registry.invoke(ToolUseBlock(id="2", name="text", input={}))).content == "as is"


def test_options_name_description_and_an_explicit_schema_that_wins() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    @tool(name="search_notes", description="Search.", input_schema=schema, idempotent=True)
    def search(q: str, limit: Annotated[int, Field(ge=1)] = 5) -> str:
        return q

    assert (search.name, search.description, search.idempotent) == ("search_notes", "Search.", True)
    assert search.input_schema == schema
    assert search.signature is None  # validated against the explicit schema


async def test_the_context_parameter_is_filled_by_the_runtime_and_hidden_from_the_model() -> None:
    seen: list[ToolContext] = []

    @tool
    def send_email(to: str, ctx: ToolContext) -> str:
        """Send an email."""
        seen.append(ctx)
        ctx.logger.info("sending")
        return f"sent to {to}"

    assert list(send_email.input_schema["properties"]) == ["to"]
    assert send_email.context_param == "ctx"

    clock = FakeClock()
    store = InMemoryThreadStore(clock=clock)
    await seed_run(store, settings=dataclasses.replace(SETTINGS, tools=("send_email",)))
    epoch = (await store.claim_run("r1", worker="w1", lease_seconds=10)).lease.epoch
    site = CallSite(
        run_id="r1", thread_id="t1", caller="alice", deadline=100.0, monotonic=lambda: 40.0
    )
    registry = ToolRegistry([send_email])

    async def call(call_id: str) -> str:
        block = await execute_tool_call(
            store,
            registry,
            run_id="r1",
            turn=1,
            epoch=epoch,
            call=ToolUseBlock(id=call_id, name="send_email", input={"to": "bo@example.com"}),
            enabled=("send_email",),
            site=site,
        )
        return block.content

    assert await call("c1") == "sent to bo@example.com"
    assert await call("c2") == "sent to bo@example.com"
    first, second = seen
    assert (first.run_id, first.thread_id, first.tool_call_id, first.caller) == (
        "r1",
        "t1",
        "c1",
        "alice",
    )
    assert (first.attempt, first.seconds_left) == (1, 60.0)
    assert first.idempotency_key != second.idempotency_key
    assert first.idempotency_key.startswith("awaken-") and len(first.idempotency_key) == 47


async def test_a_tool_error_reaches_the_model_and_a_sync_tool_runs_off_the_loop() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        raise ToolError(f"nothing about {q}")

    out = await ToolRegistry([lookup]).invoke(ToolUseBlock(id="1", name="lookup", input={"q": "x"}))
    assert (out.content, out.is_error) == ("tool 'lookup' failed: nothing about x", True)


@pytest.mark.parametrize(
    ("define", "message"),
    [
        (lambda: tool(lambda *args: None), "cannot be described"),
        (lambda: tool(name="bad name!")(lambda: None), "tool name 'bad name!'"),
        (lambda: tool(name="t", timeout=0)(lambda: None), "timeout must be positive"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_refused_with_a_reason(
    define: Any, message: str
) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        define()


def test_two_context_parameters_or_an_untyped_object_are_refused() -> None:
    def two(a: ToolContext, b: ToolContext) -> None: ...

    with pytest.raises(ToolDefinitionError, match="more than one ToolContext"):
        tool(two)

    class Opaque:
        pass

    def takes(thing: Opaque) -> None: ...

    with pytest.raises(ToolDefinitionError, match="tool takes"):
        tool(takes)
