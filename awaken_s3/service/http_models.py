"""The HTTP API's request bodies and response shapes (pure: pydantic models and views)."""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from awaken_s3.agents import MAX_TOKENS_LIMIT, MAX_TURNS_LIMIT, Agent
from awaken_s3.messages import Message
from awaken_s3.service.public_errors import public_error
from awaken_s3.service.scoping import (
    MAX_PUBLIC_ID_LENGTH,
    PublicRunId,
    PublicThreadId,
    public_id,
)
from awaken_s3.threads.models import RunState, Thread

#: request bodies above this are refused with 413 before parsing
MAX_BODY_BYTES = 256 * 1024
MAX_METADATA_ENTRIES = 32

MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=128)]
MetadataValue = Annotated[str, StringConstraints(max_length=1024)]
ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
AgentName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]

#: characters that draw nothing: controls, format characters (zero-width spaces and joiners,
#: the byte-order mark, direction marks), separators, lone combining marks, unassigned and
#: surrogate code points
_INVISIBLE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Cn", "Zs", "Zl", "Zp", "Mn", "Me"})
#: letters and symbols that are drawn as blank space (Hangul fillers, the braille blank)
_BLANK_GLYPHS: Final = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def has_visible_text(text: str) -> bool:
    """Whether ``text`` shows anything: the providers refuse a message of only whitespace,
    and one of only invisible characters gives the model nothing to answer."""
    return any(
        not char.isspace()
        and char not in _BLANK_GLYPHS
        and unicodedata.category(char) not in _INVISIBLE_CATEGORIES
        for char in text
    )


def _visible(text: str) -> str:
    if not has_visible_text(text):
        raise PydanticCustomError("blank_message", "the message has no visible text")
    return text


UserText = Annotated[str, StringConstraints(min_length=1), AfterValidator(_visible)]


class CreateThreadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    thread_id: PublicThreadId | None = None
    metadata: dict[MetadataKey, MetadataValue] = Field(
        default_factory=dict, max_length=MAX_METADATA_ENTRIES
    )


class CreateRunRequest(BaseModel):
    """A run of one of the app's agents. Every field after ``agent`` overrides the agent's own
    setting, and is accepted only when the agent lets a caller set it (``overridable``)."""

    model_config = ConfigDict(extra="forbid")

    #: the user message that starts the run
    message: UserText
    #: set it to retry a request safely: the same run id answers with the same run
    run_id: PublicRunId | None = None
    #: one of the app's agents; the app's default agent when absent
    agent: AgentName | None = None
    system: str | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)
    #: one of the agent's allowed models
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    #: some of the agent's tools, offered to the model instead of all of them
    tools: tuple[ToolName, ...] | None = Field(default=None, max_length=64)
    max_turns: int | None = Field(default=None, ge=1, le=MAX_TURNS_LIMIT)
    #: input + output tokens the run may spend
    token_budget: int | None = Field(default=None, ge=1, le=10**12)

    def overrides(self) -> dict[str, Any]:
        """The agent settings the caller chose to set, by field name."""
        keep = self.model_fields_set - {"message", "run_id", "agent"}
        return {name: getattr(self, name) for name in keep}


def thread_view(thread: Thread) -> dict[str, Any]:
    return {
        "thread_id": public_id(thread.owner, thread.thread_id),
        "message_count": thread.message_count,
        "created_at": thread.created_at,
        "metadata": dict(thread.metadata),
        # The run most recently created on the thread (it may still be running): a client that
        # holds only the thread id finds the run to follow from here after a page refresh.
        "latest_run": public_id(thread.owner, thread.active_run) if thread.active_run else None,
    }


def message_view(message: Message) -> dict[str, Any]:
    return message.model_dump(mode="json")


def run_view(run: RunState) -> dict[str, Any]:
    """What a caller may see of a run: never the lease holder, internal fields or the raw text
    of its error."""
    return {
        "run_id": public_id(run.owner, run.run_id),
        "thread_id": public_id(run.owner, run.thread_id),
        "status": run.status.value,
        "turn": run.turn,
        "message_count": run.message_count,
        "model": run.settings.model,
        "usage": {
            "input_tokens": run.usage.input_tokens,
            "output_tokens": run.usage.output_tokens,
            "cache_read_tokens": run.usage.cache_read_tokens,
            "cache_write_tokens": run.usage.cache_write_tokens,
        },
        "stop_reason": run.stop_reason,
        "error": public_error(run.error) if run.error else None,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    }


def agent_view(agent: Agent, *, model: str) -> dict[str, Any]:
    """``GET /agents``: what a caller may know of an agent (never its system prompt, which is
    the operator's)."""
    return {
        "name": agent.name,
        "description": agent.description,
        "model": model,
        "overridable": sorted(agent.overridable),
        "tools": [
            {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}
            for spec in agent.registry.specs()
        ],
    }


#: pydantic error types whose message is a fixed template (a limit, a type, a pattern), never
#: the rejected input; any other type's message is replaced by :data:`INVALID_VALUE`
_FIXED_MESSAGE_TYPES: Final = frozenset(
    {
        "missing",
        "extra_forbidden",
        "string_type",
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "int_type",
        "int_parsing",
        "int_from_float",
        "float_type",
        "float_parsing",
        "finite_number",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "bool_type",
        "bool_parsing",
        "dict_type",
        "list_type",
        "tuple_type",
        "too_short",
        "too_long",
        "model_type",
        "blank_message",
    }
)
INVALID_VALUE: Final = "invalid value"
#: what an id field's own validator refuses, said without the id
ID_RULE: Final = (
    f"an id is 1 to {MAX_PUBLIC_ID_LENGTH} ASCII letters, digits, '-' or '_', starting with "
    "a letter or digit"
)


def _location(loc: Any, fields: Collection[str]) -> list[str]:
    """The error's place, cut where it would name a key the caller chose (an unknown field,
    a metadata key): only the model's own field names and list positions are kept."""
    kept: list[str] = []
    for depth, part in enumerate(loc or ()):
        if isinstance(part, int) or (depth == 0 and part in fields):
            kept.append(str(part))
        else:
            break
    return kept


def _message(error: Any, loc: list[str], fields: Collection[str]) -> str:
    kind = str(error.get("type", ""))
    if kind == "extra_forbidden" and not loc:
        return f"not a field of this request; the fields are {', '.join(sorted(fields))}"
    if kind in _FIXED_MESSAGE_TYPES:
        return str(error.get("msg", ""))
    if kind == "value_error" and loc[:1] in (["run_id"], ["thread_id"]):
        return ID_RULE
    return INVALID_VALUE


def validation_details(errors: list[Any], fields: Collection[str] = ()) -> list[dict[str, Any]]:
    """Field errors that never carry the rejected input (it may hold user data or be huge),
    nor a key the caller made up: ``fields`` are the model's field names."""
    details = []
    for error in errors:
        loc = _location(error.get("loc"), fields)
        details.append(
            {"loc": loc, "msg": _message(error, loc, fields), "type": str(error.get("type", ""))}
        )
    return details
