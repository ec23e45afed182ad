"""A user's agent in its own process: a real framework agent loop with one tool, its model
wrapped in ``ResumableModel``, pointed at the test's wire server.

``python -m tests.integrations.agent_proc CONFIG_JSON`` runs one agent invocation and prints
``{"answer": ...}``. The tool appends its arguments to ``tool_log``, so the test counts tool
runs across a SIGKILL. Nothing is shared with the test process but the checkpoint directory,
the tool log, the saved conversation and the wire server's socket.

With ``"recipe": true`` the run goes through the documented recipe for a crash of the whole
agent loop: the framework's own persistence (a Strands ``FileSessionManager``, a Pydantic AI
message history saved at every step) and the adapters' ``invoke_resumable`` /
``run_resumable``, under the run id ``run_id``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from awaken_s3 import CheckpointPolicy, FsStreamCheckpointStore

API_KEY = "sk-wire-test-KEY-7f3a9c"
PROMPT = "What is the weather in Paris?"
#: checkpoint every delta, so a kill lands right after what the test waited for
EAGER = CheckpointPolicy(min_interval=0.0, min_bytes=0)


def log_tool_run(config: dict[str, Any], city: str) -> str:
    with Path(config["tool_log"]).open("a") as log:
        log.write(json.dumps({"city": city}) + "\n")
    return f"18C and cloudy in {city}"


async def run_strands(config: dict[str, Any], store: FsStreamCheckpointStore) -> str:
    from strands import Agent, tool

    from awaken_s3.integrations.strands import ResumableModel

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: the city
        """
        return log_tool_run(config, city)

    inner: Any
    if config["dialect"] == "anthropic":
        from strands.models.anthropic import AnthropicModel

        inner = AnthropicModel(
            client_args={"api_key": API_KEY, "base_url": config["url"], "max_retries": 0},
            model_id="claude-opus-4-6",
            max_tokens=1024,
        )
    else:
        from strands.models.openai import OpenAIModel

        inner = OpenAIModel(
            client_args={"api_key": API_KEY, "base_url": config["url"] + "/v1", "max_retries": 0},
            model_id="gpt-4.1",
        )
    model = ResumableModel(inner, store=store, key=config["key"], checkpoint_policy=EAGER)
    if config.get("recipe"):
        from strands.session.file_session_manager import FileSessionManager

        from awaken_s3.integrations.strands import invoke_resumable

        session = FileSessionManager(session_id="conversation-7", storage_dir=config["saved"])
        agent = Agent(
            model=model, tools=[get_weather], callback_handler=None, session_manager=session
        )
        result = await invoke_resumable(agent, PROMPT, run_id=config["run_id"])
        return str(result).strip()
    agent = Agent(model=model, tools=[get_weather], callback_handler=None)
    return str(await agent.invoke_async(PROMPT)).strip()


async def run_pydantic_ai(config: dict[str, Any], store: FsStreamCheckpointStore) -> str:
    from pydantic_ai import Agent

    from awaken_s3.integrations.pydantic_ai import ResumableModel

    inner: Any
    if config["dialect"] == "anthropic":
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        client = AsyncAnthropic(api_key=API_KEY, base_url=config["url"], max_retries=0)
        inner = AnthropicModel(
            "claude-opus-4-6", provider=AnthropicProvider(anthropic_client=client)
        )
    else:
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        gpt = AsyncOpenAI(api_key=API_KEY, base_url=config["url"] + "/v1", max_retries=0)
        inner = OpenAIChatModel("gpt-4.1", provider=OpenAIProvider(openai_client=gpt))
    model = ResumableModel(inner, store=store, key=config["key"], checkpoint_policy=EAGER)
    agent = Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return log_tool_run(config, city)

    seen: list[object] = []
    requested = True
    if config.get("recipe"):
        from awaken_s3.integrations.pydantic_ai import MessageFile, iter_resumable

        history = MessageFile(Path(config["saved"]) / "conversation-7.json")
        requested = False  # a rerun of a finished run asks the model nothing
        async with iter_resumable(agent, PROMPT, run_id=config["run_id"], history=history) as run:
            async for node in run:
                requested = requested or Agent.is_model_request_node(node)
                if config.get("streaming") and Agent.is_model_request_node(node):
                    events: Any
                    async with node.stream(run.ctx) as events:
                        seen += [event async for event in events]
        assert run.result is not None
        result = run.result
    elif config.get("streaming"):
        # An event stream handler makes every model request a streaming one.
        async def handler(_ctx: Any, events: Any) -> None:
            async for event in events:
                seen.append(event)

        result = await agent.run(PROMPT, event_stream_handler=handler)
    else:
        result = await agent.run(PROMPT)
    streamed = seen or not requested or not config.get("streaming")
    assert streamed, "the model requests were not streamed"
    return str(result.output).strip()


async def main(config: dict[str, Any]) -> dict[str, Any]:
    with FsStreamCheckpointStore(config["store"]) as store:
        runner = run_strands if config["framework"] == "strands" else run_pydantic_ai
        return {"answer": await runner(config, store)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))), flush=True)
