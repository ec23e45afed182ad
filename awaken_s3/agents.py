"""Agents as code: :class:`Agent` (a model, a system prompt, tools, limits) and :class:`App`.

A user module defines an ``App`` of one or more agents; the deployed handlers, ``awaken-s3 dev
--app MODULE:ATTRIBUTE`` and the tests all load that one object::

    from awaken_s3 import Agent, App, ToolContext, tool

    @tool
    def lookup(topic: str) -> str:
        \"\"\"Look a topic up in the notes.\"\"\"
        ...

    @tool(idempotent=False)
    def send_email(to: str, body: str, ctx: ToolContext) -> str:
        \"\"\"Send an email.\"\"\"
        ...  # ctx.idempotency_key goes to the mail API

    app = App([Agent("support", system="You help customers.", tools=[lookup, send_email])])

    # handlers: worker.py, api.py, sweeper.py
    lambda_handler = app.worker_handler()

The agent is the server's decision, not the caller's: a run of an agent gets the agent's system
prompt, model, tools and limits. A caller may set a field of the run's request only when the
agent lists it in ``overridable`` (none by default); anything else is refused before the run
is created (:func:`plan_run`, the one place that decides a run's provider, model, prompt,
tools and limits; a 422 at the HTTP API). A run keeps the settings it
was created with (they are stored with it), so a deploy that changes an agent changes the
runs started after it, never one in flight; a run whose agent or tool has gone since fails
with a classified error (``unknown_agent``, ``unknown_tool``).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from awaken_s3.errors import AwakenError
from awaken_s3.failures import FailureCode
from awaken_s3.runtime.tools import Tool, ToolRegistry, as_tool
from awaken_s3.threads.models import RunSettings

if TYPE_CHECKING:
    from awaken_s3.mcp import MCPServer
    from awaken_s3.providers.config import ProviderSettings
    from awaken_s3.service.worker import LambdaHandler, ProviderFactory
    from awaken_s3.streaming.provider import ToolSpec

log = logging.getLogger("awaken_s3.agents")

#: request fields an agent may let a caller set on a run
OVERRIDABLE_FIELDS: Final = frozenset(
    {"system", "model", "tools", "max_tokens", "temperature", "max_turns", "token_budget"}
)
AGENT_NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#: calls of one turn that run at once unless the agent says otherwise
DEFAULT_MAX_PARALLEL_TOOLS: Final = 4
#: the most model output tokens a turn may ask for (what the HTTP API accepts)
MAX_TOKENS_LIMIT: Final = 64_000
MAX_TURNS_LIMIT: Final = 100

ProviderName = Literal["bedrock", "anthropic", "openai"]


class AgentDefinitionError(AwakenError, ValueError):
    """An agent or app is defined in a way that cannot work (the message says how to fix it)."""


class RunRequestRefused(AwakenError, ValueError):
    """A run request asks for something the agent does not allow.

    ``field`` is the request field at fault, ``choices`` what would have been accepted.
    """

    def __init__(self, field: str, message: str, *, kind: str, choices: Sequence[str]) -> None:
        super().__init__(message)
        self.field = field
        self.kind = kind
        self.choices = tuple(choices)


class UnknownAgent(AwakenError, LookupError):
    def __init__(self, name: str, choices: Sequence[str]) -> None:
        super().__init__(f"no agent named {name!r}; the agents are {', '.join(choices)}")
        self.name = name
        self.choices = tuple(choices)


def _names(items: Iterable[str]) -> str:
    return ", ".join(sorted(items)) or "none"


@dataclass(frozen=True, kw_only=True)
class Agent:
    """One agent: what runs of it send to the model, which tools they may call, their limits.

    ``provider`` None is the environment's ``AWAKEN_PROVIDER`` (``bedrock``, ``anthropic``,
    ``openai``), configured by the same settings, and ``model`` None the run's provider's
    default: the environment's ``AWAKEN_MODEL`` when the agent keeps the environment's
    provider, else that provider's own (:func:`plan_run`). ``models`` are further models a
    caller may choose when ``model`` is overridable (``AWAKEN_ALLOWED_MODELS`` adds to them
    for an agent on the environment's provider).
    ``token_budget``: input + output tokens a run may spend; the run fails with
    ``budget_exhausted`` once a committed turn passes it. ``max_parallel_tools``: calls of one
    turn that run at once (a tool made with ``exclusive=True`` always runs alone).
    ``tool_timeout``: seconds any of its tool calls may take (a tool's own ``timeout``, and the
    time the worker's invocation has left, cut a call sooner when they come first).
    ``toolsets``: MCP servers (:class:`~awaken_s3.mcp.MCPServer`) whose tools the agent offers
    too, listed once per process; a server that cannot be listed leaves the agent its other
    tools (docs/AGENTS.md, "MCP servers").
    """

    name: str = field(kw_only=False)
    description: str = ""
    system: str | None = None
    tools: Sequence[Tool[..., Any] | Callable[..., Any]] = ()
    model: str | None = None
    provider: ProviderName | None = None
    models: Collection[str] = ()
    max_turns: int = 25
    max_tokens: int = 4096
    temperature: float | None = None
    token_budget: int | None = None
    overridable: Collection[str] = frozenset()
    max_parallel_tools: int = DEFAULT_MAX_PARALLEL_TOOLS
    tool_timeout: float | None = None
    toolsets: Sequence[MCPServer] = ()
    registry: ToolRegistry = field(init=False, repr=False, compare=False)
    _adopting: threading.Lock = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.match(AGENT_NAME_PATTERN, self.name):
            raise AgentDefinitionError(
                f"agent name {self.name!r}: use 1-64 letters, digits, '_', '.' or '-', "
                "starting with a letter or digit"
            )
        tools = tuple(as_tool(item) for item in self.tools)
        seen: set[str] = set()
        for item in tools:
            if item.name in seen:
                raise AgentDefinitionError(f"agent {self.name}: two tools named {item.name!r}")
            seen.add(item.name)
        object.__setattr__(self, "tools", tools)
        if self.tool_timeout is not None and not self.tool_timeout > 0:
            raise AgentDefinitionError(f"agent {self.name}: tool_timeout must be positive")
        object.__setattr__(self, "registry", ToolRegistry(tools, timeout=self.tool_timeout))
        object.__setattr__(self, "toolsets", _toolsets(self.name, self.toolsets))
        object.__setattr__(self, "_adopting", threading.Lock())
        overridable = frozenset(self.overridable)
        unknown = overridable - OVERRIDABLE_FIELDS
        if unknown:
            raise AgentDefinitionError(
                f"agent {self.name}: cannot make {_names(unknown)} overridable; the request "
                f"fields are {_names(OVERRIDABLE_FIELDS)}"
            )
        object.__setattr__(self, "overridable", overridable)
        object.__setattr__(self, "models", tuple(self.models))
        if self.provider not in (None, "bedrock", "anthropic", "openai"):
            raise AgentDefinitionError(
                f"agent {self.name}: provider must be bedrock, anthropic or openai, not "
                f"{self.provider!r}"
            )
        _check_range(self.name, "max_turns", self.max_turns, 1, MAX_TURNS_LIMIT)
        _check_range(self.name, "max_tokens", self.max_tokens, 1, MAX_TOKENS_LIMIT)
        _check_range(self.name, "max_parallel_tools", self.max_parallel_tools, 1, 64)
        if self.token_budget is not None:
            _check_range(self.name, "token_budget", self.token_budget, 1, 10**12)
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise AgentDefinitionError(f"agent {self.name}: temperature must be within 0..2")

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools registered so far: the function tools, and those of the MCP servers
        listed in this process (:meth:`load_toolsets`)."""
        return self.registry.names

    async def load_toolsets(self) -> tuple[MCPServer, ...]:
        """List the MCP servers not listed yet and register their tools; the servers that
        could not be listed (tried again on the next call)."""
        if not self.toolsets:
            return ()
        from awaken_s3.mcp import load_toolsets

        tools, down = await load_toolsets(self.toolsets)
        self._adopt(tools)
        return tuple(down)

    def load_toolsets_blocking(self) -> tuple[MCPServer, ...]:
        """:meth:`load_toolsets` from synchronous code (the API's run creation). From a
        thread that runs an event loop it lists nothing and answers () (logged at debug)."""
        if not self.toolsets:
            return ()
        from awaken_s3.stores.sync import loop_running

        if loop_running():
            # The worker plans a run's provider inside its loop: listing there would stall
            # the loop and the lease it renews. The worker lists at the claim instead.
            log.debug("agent %s: MCP servers not listed from a running event loop", self.name)
            return ()
        from awaken_s3.mcp import MCPUnavailable

        down: list[MCPServer] = []
        for server in self.toolsets:
            try:
                self._adopt(server.tools_blocking())
            except MCPUnavailable:
                down.append(server)
        return tuple(down)

    def _adopt(self, tools: Iterable[Tool[..., Any]]) -> None:
        with self._adopting:
            for item in tools:
                present = self.registry.get(item.name)
                if present is None:
                    self.registry.add(item)
                elif present is not item:
                    log.error(
                        "agent %s: MCP tool %s skipped: another tool has its name",
                        self.name,
                        item.name,
                    )

    async def tool_specs(self, names: Sequence[str]) -> tuple[ToolSpec, ...]:
        """The specs a run's requests offer for its tools ``names``, after listing the MCP
        servers. A name no tool has raises KeyError, unless a server could not be listed: its
        tools are then left out and the run goes on with the others (logged)."""
        down = await self.load_toolsets()
        if down:
            missing = [name for name in names if self.registry.get(name) is None]
            if missing:
                log.warning(
                    "agent %s: MCP servers down (%s); their tools are not offered: %s",
                    self.name,
                    ", ".join(s.label for s in down),
                    ", ".join(missing),
                )
                names = [name for name in names if name not in missing]
        return tuple(self.registry.specs(names))

    def provider_settings(self, env: Mapping[str, str] | None = None) -> ProviderSettings:
        """The provider configuration of this agent's runs: the environment's, with the
        agent's own provider and model where it names them."""
        import os

        from awaken_s3.providers.config import ProviderSettings

        source = dict(os.environ if env is None else env)
        if self.provider is not None and self.provider != _environment_provider(source):
            source["AWAKEN_PROVIDER"] = self.provider
            source.pop("AWAKEN_MODEL", None)  # the environment's model is another provider's
        if self.model is not None:
            source["AWAKEN_MODEL"] = self.model
        return ProviderSettings.from_env(source)


def _toolsets(agent: str, toolsets: Sequence[Any]) -> tuple[MCPServer, ...]:
    from awaken_s3.mcp import MCPServer

    found = tuple(toolsets)
    for item in found:
        if not isinstance(item, MCPServer):
            raise AgentDefinitionError(
                f"agent {agent}: toolsets takes MCPServer objects, not {type(item).__name__}"
            )
    return found


def _check_range(agent: str, name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AgentDefinitionError(f"agent {agent}: {name} must be a whole number {low}..{high}")


def _run_model(
    agent: Agent,
    request: Mapping[str, Any],
    *,
    default_model: str,
    allowed_models: Collection[str],
) -> str:
    """The agent's model (else ``default_model``), or the one ``request`` names if allowed."""
    model = agent.model or default_model
    if "model" in request and request["model"] is not None:
        allowed = {model, *agent.models, *allowed_models}
        if request["model"] not in allowed:
            # Fixed words: the caller's own string is never echoed back.
            raise RunRequestRefused(
                "model",
                f"that model is not allowed for agent {agent.name}; choose {_names(allowed)}",
                kind="model_not_allowed",
                choices=sorted(allowed),
            )
        model = request["model"]
    return model


def _run_tools(agent: Agent, request: Mapping[str, Any]) -> tuple[str, ...]:
    """The agent's tools, or those of them ``request`` names (in its order, once each). The
    MCP servers are listed first (once per process): a run is created with their tools too,
    or, when one cannot be listed, without its tools (logged)."""
    down = agent.load_toolsets_blocking()
    if down:
        log.warning(
            "agent %s: a run is created without the tools of the MCP servers %s",
            agent.name,
            ", ".join(server.label for server in down),
        )
    tools = agent.tool_names
    if "tools" in request and request["tools"] is not None:
        chosen = tuple(dict.fromkeys(request["tools"]))
        if any(name not in tools for name in chosen):
            raise RunRequestRefused(
                "tools",
                f"agent {agent.name} has no such tool; its tools are {_names(tools)}",
                kind=FailureCode.UNKNOWN_TOOL,
                choices=sorted(tools),
            )
        tools = chosen
    return tools


def resolve_run_settings(
    agent: Agent,
    request: Mapping[str, Any],
    *,
    default_model: str,
    allowed_models: Collection[str] = (),
) -> RunSettings:
    """The settings a run of ``agent`` is created with (pure).

    ``request`` holds only the fields the caller sent (their values already validated for
    type and range). A field the agent does not list as overridable, a tool the agent does not
    have or a model it does not allow raises :class:`RunRequestRefused`, whose message names
    the field and the valid choices but never repeats what the caller sent.
    """
    for name in request:
        if name not in agent.overridable:
            raise RunRequestRefused(
                name,
                f"agent {agent.name} does not let a caller set {name}; it allows "
                f"{_names(agent.overridable)}",
                kind="not_overridable",
                choices=sorted(agent.overridable),
            )
    model = _run_model(agent, request, default_model=default_model, allowed_models=allowed_models)
    tools = _run_tools(agent, request)

    def pick(name: str, default: Any) -> Any:
        value = request.get(name)
        return default if value is None else value

    return RunSettings(
        model=model,
        system=pick("system", agent.system),
        max_tokens=pick("max_tokens", agent.max_tokens),
        temperature=pick("temperature", agent.temperature),
        tools=tools,
        max_turns=pick("max_turns", agent.max_turns),
        agent=agent.name,
        token_budget=pick("token_budget", agent.token_budget),
    )


@dataclass(frozen=True)
class RunPlan:
    """What a run of an agent is: the provider its turns stream from (configured for the
    run's model) and the settings stored with the run."""

    provider: ProviderSettings
    settings: RunSettings


def plan_run(
    agent: Agent,
    request: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> RunPlan:
    """A run's provider, model, prompt, tools and limits, from ``agent``, the fields the
    caller sent (``request``) and the environment's defaults (``env``: ``os.environ``).

    The one place that decides them: the HTTP API creates a run with it, ``GET /agents``
    shows its model, the worker streams from its provider. The model is always one of the
    run's provider: the agent's own, else that provider's default (the environment's
    ``AWAKEN_MODEL`` only when the agent keeps the environment's provider), or a model the
    caller may choose. ``AWAKEN_ALLOWED_MODELS`` are the environment's provider's models, so
    they widen the choice only of agents that keep it. Raises :class:`RunRequestRefused`.
    """
    import os

    from awaken_s3.service.config import ApiSettings

    source = os.environ if env is None else env
    provider = agent.provider_settings(source)
    keeps_environment = agent.provider is None or agent.provider == _environment_provider(source)
    extra = ApiSettings.from_env(source).allowed_models if keeps_environment else frozenset()
    settings = resolve_run_settings(
        agent, request or {}, default_model=provider.model, allowed_models=extra
    )
    return RunPlan(provider.model_copy(update={"model": settings.model}), settings)


def _environment_provider(env: Mapping[str, str]) -> str:
    return (env.get("AWAKEN_PROVIDER") or "bedrock").strip().lower()


class App:
    """The agents of one deployment. The first is the default (a run that names no agent).

    The same object serves the three Lambda functions (:meth:`worker_handler`,
    :meth:`api_handler`, :meth:`sweeper_handler`), ``awaken-s3 dev --app`` and the tests.
    """

    def __init__(self, agents: Iterable[Agent]) -> None:
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            if not isinstance(agent, Agent):
                raise AgentDefinitionError(f"App takes Agent objects, not {type(agent).__name__}")
            if agent.name in self._agents:
                raise AgentDefinitionError(f"two agents named {agent.name!r}")
            self._agents[agent.name] = agent
        if not self._agents:
            raise AgentDefinitionError("an App needs at least one agent")

    def __iter__(self) -> Iterator[Agent]:
        return iter(self._agents.values())

    def __len__(self) -> int:
        return len(self._agents)

    def __repr__(self) -> str:
        return f"App([{', '.join(repr(name) for name in self._agents)}])"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._agents)

    @property
    def default(self) -> Agent:
        return next(iter(self._agents.values()))

    def agent(self, name: str | None = None) -> Agent:
        """The agent called ``name``; the default one for None or "" (runs stored before
        agents existed name none). Raises :class:`UnknownAgent`."""
        if not name:
            return self.default
        try:
            return self._agents[name]
        except KeyError:
            raise UnknownAgent(name, self.names) from None

    def agent_of(self, settings: RunSettings) -> Agent:
        return self.agent(settings.agent)

    # -- the Lambda functions

    def worker_handler(self, *, provider_factory: ProviderFactory | None = None) -> LambdaHandler:
        """The SQS worker's ``lambda_handler``. ``provider_factory`` replaces every agent's
        configured provider (tests, a local scripted model)."""
        from awaken_s3.service.worker import make_handler

        return make_handler(app=self, provider_factory=provider_factory)

    def api_handler(self) -> LambdaHandler:
        """The HTTP API's ``lambda_handler``, serving this app's agents."""
        from awaken_s3.service.http import handler_for

        return handler_for(self)

    def sweeper_handler(self) -> LambdaHandler:
        """The scheduled sweeper's ``lambda_handler`` (it drives runs of every agent alike)."""
        from awaken_s3.service.sweeper_job import lambda_handler

        return lambda_handler


#: the name of the agent of an app built without agents (:func:`default_agent`)
DEFAULT_AGENT_NAME: Final = "default"


def default_agent(tools: Iterable[Tool[..., Any] | Callable[..., Any]] = ()) -> Agent:
    """The agent of this repository's own handlers, and of a run loop or worker given tools
    instead of an app: the environment's provider and model, no system prompt of its own,
    and a caller may set the system prompt, an allowed model, the tools and the limits of its
    run."""
    return Agent(
        DEFAULT_AGENT_NAME,
        description="The model the environment configures (AWAKEN_PROVIDER, AWAKEN_MODEL).",
        tools=list(tools),
        overridable={"system", "model", "tools", "max_tokens", "temperature", "max_turns"},
    )


def default_app() -> App:
    """The app of this repository's own handlers: the one :func:`default_agent`."""
    return App([default_agent()])


def load_app(reference: str) -> App:
    """The :class:`App` that ``MODULE:ATTRIBUTE`` names (``ATTRIBUTE`` defaults to ``app``),
    imported the way uvicorn imports ``module:app``; the error names what is wrong."""
    import importlib

    module_name, _, attribute = reference.partition(":")
    attribute = attribute or "app"
    if not module_name or not all(part.isidentifier() for part in attribute.split(".")):
        raise AgentDefinitionError(
            f"{reference!r} is not MODULE:ATTRIBUTE (for example myagents.app:app)"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise AgentDefinitionError(
                f"cannot import {module_name!r}: no such module (run from the directory that "
                "holds it, or put it on PYTHONPATH)"
            ) from exc
        raise
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AgentDefinitionError(
                f"module {module_name!r} has no attribute {attribute!r}"
            ) from None
    if callable(target) and not isinstance(target, App):
        target = target()  # an app factory, as uvicorn's --factory
    if not isinstance(target, App):
        raise AgentDefinitionError(
            f"{reference} is a {type(target).__name__}, not an awaken_s3.App"
        )
    return target
