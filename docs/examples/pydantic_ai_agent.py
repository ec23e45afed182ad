"""A Pydantic AI agent whose model requests survive a crash: run it again with the same key."""

import sys

from pydantic_ai import Agent

from awaken_s3 import FsStreamCheckpointStore
from awaken_s3.integrations.pydantic_ai import ResumableModel

store = FsStreamCheckpointStore(sys.argv[1])  # S3StreamCheckpointStore("bucket") on AWS
agent = Agent(ResumableModel("anthropic:claude-sonnet-4-5", store=store, key="weather-1"))


@agent.tool_plain
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C and cloudy in {city}"


print(agent.run_sync("What is the weather in Paris?").output)
