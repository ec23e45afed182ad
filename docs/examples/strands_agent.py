"""A Strands agent whose model turns survive a crash: run it again with the same key."""

import sys

from strands import Agent, tool
from strands.models.anthropic import AnthropicModel

from awaken_s3 import FsStreamCheckpointStore
from awaken_s3.integrations.strands import ResumableModel


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city
    """
    return f"18C and cloudy in {city}"


store = FsStreamCheckpointStore(sys.argv[1])  # S3StreamCheckpointStore("bucket") on AWS
claude = AnthropicModel(model_id="claude-sonnet-4-5", max_tokens=1024)
model = ResumableModel(claude, store=store, key="weather-1")
agent = Agent(model=model, tools=[get_weather], callback_handler=None)
print(agent("What is the weather in Paris?"))
