"""The HTTP API's request bodies and response shapes (pure: pydantic models and views)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from awaken_s3.agents import MAX_TOKENS_LIMIT, MAX_TURNS_LIMIT, Agent
from awaken_s3.messages import Message
from awaken_s3.service.public_errors import public_error
from awaken_s3.service.scoping import PublicRunId, PublicThreadId, public_id
from awaken_s3.threads.models import RunState, Thread

#: request bodies above this are refused with 413 before parsing
MAX_BODY_BYTES = 256 * 1024
MAX_METADATA_ENTRIES = 32

MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=128)]
MetadataValue = Annotated[str, StringConstraints(max_length=1024)]
ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
AgentName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


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
    message: Annotated[str, StringConstraints(min_length=1)]
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


def validation_details(errors: list[Any]) -> list[dict[str, Any]]:
    """Field errors without the rejected input (it may hold user data or be huge)."""
    return [
        {
            "loc": [str(part) for part in error.get("loc", ())],
            "msg": str(error.get("msg", "")),
            "type": str(error.get("type", "")),
        }
        for error in errors
    ]
