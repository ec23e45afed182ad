"""A Pydantic AI agent whose run survives a crash: run it again with the same run id."""

import asyncio
import sys
from pathlib import Path

from pydantic_ai import Agent

from awaken_s3 import FsStreamCheckpointStore
from awaken_s3.integrations import checkpoint_key
from awaken_s3.integrations.pydantic_ai import MessageFile, ResumableModel, run_resumable

directory, run_id = sys.argv[1], sys.argv[2]  # the run id comes with the job
store = FsStreamCheckpointStore(directory)  # S3StreamCheckpointStore("bucket") on AWS
key = checkpoint_key("weather", run_id)
agent = Agent(ResumableModel("anthropic:claude-sonnet-4-5", store=store, key=key))


@agent.tool_plain
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C and cloudy in {city}"


# The conversation, saved before every step of the run (any MessageStore: a row, an object).
history = MessageFile(Path(directory) / f"weather-{run_id}.json")
prompt = "What is the weather in Paris?"
result = asyncio.run(run_resumable(agent, prompt, run_id=run_id, history=history))
print(result.output)
