"""A Strands agent whose run survives a crash: run it again with the same run id."""

import asyncio
import sys

from strands import Agent, tool
from strands.models.anthropic import AnthropicModel
from strands.session.file_session_manager import FileSessionManager

from awaken_s3 import FsStreamCheckpointStore
from awaken_s3.integrations import checkpoint_key
from awaken_s3.integrations.strands import ResumableModel, invoke_resumable


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city
    """
    return f"18C and cloudy in {city}"


directory, run_id = sys.argv[1], sys.argv[2]  # the run id comes with the job
store = FsStreamCheckpointStore(directory)  # S3StreamCheckpointStore("bucket") on AWS
claude = AnthropicModel(model_id="claude-sonnet-4-5", max_tokens=1024)
model = ResumableModel(claude, store=store, key=checkpoint_key("weather", run_id))
# The conversation, saved message by message (S3SessionManager on AWS).
session = FileSessionManager(session_id=f"weather-{run_id}", storage_dir=f"{directory}/sessions")
agent = Agent(model=model, tools=[get_weather], session_manager=session, callback_handler=None)
prompt = "What is the weather in Paris?"
print(asyncio.run(invoke_resumable(agent, prompt, run_id=run_id)))
